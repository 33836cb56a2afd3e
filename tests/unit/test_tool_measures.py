"""The tools experiment's pieces: calculator's no-tool form, tool statistics per problem, the tool
measures against hand computations, and the control models' moves across pretraining seeds."""

from __future__ import annotations

import numpy as np
import pytest

from rlvr.errors import UserError
from rlvr.eval.passk import bootstrap_ci
from rlvr.experiments import measures
from rlvr.experiments.claims import judge
from rlvr.experiments.evaluate import per_problem_stats
from rlvr.experiments.replicates import claim_args
from rlvr.experiments.spec import ClaimSpec, load
from rlvr.tasks.environment import DEFAULT_LIMITS, environments_for, is_tool_task
from rlvr.tasks.registry import get_task

RUN = {name: m.run for name, m in measures.MEASURES.items()}


def test_calculator_without_the_tool_is_the_same_problems_single_turn():
    with_tool, without = get_task("calculator", digits=1), get_task("calculator", digits=1, tool=False)
    assert is_tool_task(with_tool) and not is_tool_task(without)
    problems = without.problems("heldout", 5)
    assert problems == with_tool.problems("heldout", 5)  # same problems, answers, gold episodes
    assert environments_for(without, problems, DEFAULT_LIMITS) is None
    assert len(environments_for(with_tool, problems, DEFAULT_LIMITS)) == 5
    gold = problems[0].solutions[0]  # the policy writes the tool's output itself: still verified right
    assert without.verify(gold, problems[0]).correct
    with pytest.raises(UserError, match="bad tool"):
        get_task("calculator", tool="no")


def _row(problem, correct, calls=None, failed=None):
    row = {"problem_id": problem, "correct": correct, "mean_entropy": 1.0, "num_tokens": 4, "answer": "1"}
    return row if calls is None else {**row, "tool_calls": calls, "failed_calls": failed}


def test_per_problem_tool_statistics_only_for_episodes():
    rows = [_row("a", True, 1, 0), _row("a", False, 2, 1), _row("b", True, 0, 0), _row("b", True, 1, 1)]
    stats = per_problem_stats(rows, ["a", "b"])
    assert stats["tool_calls"] == [1.5, 0.5] and stats["failed_calls"] == [0.5, 0.5]
    plain = per_problem_stats([_row("a", True), _row("a", False)], ["a"])
    assert "tool_calls" not in plain and plain["correct"] == [1]  # single-turn statistics unchanged


def _stats(correct, n=4, calls=None):
    out = {"ids": [f"p{i}" for i in range(len(correct))], "n": n, "correct": list(correct)}
    return out if calls is None else {**out, "tool_calls": list(calls), "failed_calls": [0.0] * len(calls)}


def test_tool_calls_diff_by_hand_and_not_measured_without_tool_statistics():
    cells = {("e", "base", None): _stats([1, 0, 2], calls=[0.5, 0.25, 1.0]),
             ("e", "rl", 0): _stats([3, 1, 2], calls=[1.0, 1.0, 1.0]),
             ("e", "rl_notool", 0): _stats([0, 0, 0])}
    get = lambda e, m, s: cells[(e, m, s)]  # noqa: E731
    est, det = RUN["tool_calls_diff"](get, {"eval": "e", "model": "rl", "against": "base"}, [0], [None])
    diff = np.array([0.5, 0.75, 0.0])
    assert est[0].value == pytest.approx(diff.mean()) and (est[0].lo, est[0].hi) == pytest.approx(bootstrap_ci(diff))
    assert det["s0"]["model"] == 1.0 and det["s0"]["against"] == pytest.approx(1.75 / 3)
    claim = ClaimSpec(id="c", claim="c", paper="p", measure="tool_calls_diff", expect="positive",
                      args={"eval": "e", "model": "rl_notool", "against": "base"})
    row = judge(claim, get, [0], [None])
    assert row["verdict"] == "not measured" and "no tool calls" in row["why"]


def test_tool_calls_diff_of_no_problems_is_nan_and_inconclusive_like_the_other_measures():
    # An evaluation of zero problems: the per-problem estimate is NaN (as measures' pass@k ones are),
    # not a bootstrap error, and the claim reads inconclusive.
    cells = {("e", "base", None): _stats([], calls=[]), ("e", "rl", 0): _stats([], calls=[])}
    get = lambda e, m, s: cells[(e, m, s)]  # noqa: E731
    est, _ = RUN["tool_calls_diff"](get, {"eval": "e", "model": "rl", "against": "base"}, [0], [None])
    assert np.isnan([est[0].value, est[0].lo, est[0].hi]).all()
    claim = ClaimSpec(id="c", claim="c", paper="p", measure="tool_calls_diff", expect="positive",
                      args={"eval": "e", "model": "rl", "against": "base"})
    assert judge(claim, get, [0], [None])["verdict"] == "inconclusive"


def test_support_contrast_is_the_difference_of_net_expansions():
    # with the tool: base solves p0, p1; rl solves p0, p2, p3 -> net (0, -1, +1, +1)
    # without: base_notool solves p0; rl_notool solves p1 -> net (-1, +1, 0, 0)
    cells = {("e", "base", None): _stats([2, 1, 0, 0]), ("e", "rl", 0): _stats([4, 0, 1, 3]),
             ("e", "base_notool", None): _stats([1, 0, 0, 0]), ("e", "rl_notool", 0): _stats([0, 2, 0, 0])}
    get = lambda e, m, s: cells[(e, m, s)]  # noqa: E731
    args = {"eval": "e", "model": "rl", "against": "base", "control": "rl_notool", "control_against": "base_notool"}
    est, det = RUN["support_contrast"](get, args, [0], [None])
    diff = np.array([1.0, -2.0, 1.0, 1.0])
    assert est[0].value == pytest.approx(0.25) and (est[0].lo, est[0].hi) == pytest.approx(bootstrap_ci(diff))
    assert det["s0"] == {"net_model": 0.25, "net_control": 0.0, "k": 4}
    # the same as support_balance's (shrunk - expanded) with the sign turned, one side at a time
    balance, _ = RUN["support_balance"](get, {"eval": "e", "model": "rl", "against": "base"}, [0], [None])
    assert balance[0].value == pytest.approx(-det["s0"]["net_model"])


def test_the_tools_declaration_moves_controls_to_each_pretraining_seed():
    exp = load("tools")
    assert exp.pretrain_seeds == 2 and {"rl@p1", "rl_notool@p1", "base_notool@p1"} <= set(exp.models)
    contrast = next(c for c in exp.claims if c.measure == "support_contrast")
    moved = claim_args(contrast.args, exp.models, 1)
    assert moved == {"eval": "arms", "model": "rl@p1", "against": "base@p1", "control": "rl_notool@p1",
                     "control_against": "base_notool@p1"}
    assert {c.id for c in exp.claims if c.kind == "premise"} == {"tool_matters_for_base", "tool_calls_rise"}
