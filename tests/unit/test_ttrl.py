"""Test-time training (task.test_time, TTRL): the training prompts are the evaluation problems,
and their ground-truth answers never reach the reward or the update."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch

from rlvr.config import ConfigError, load_config
from rlvr.model.tiny import TinyGPT
from rlvr.model.tokenizer import CharTokenizer
from rlvr.tasks.base import Verdict
from rlvr.train import loop
from rlvr.train.loop import build_state, heldout_pass_rate, validate
from rlvr.train.step import rl_step

TOK = CharTokenizer()
BASE = ["model.n_layer=1", "model.d_model=32", "model.n_head=2", "algo.prompts_per_step=4",
        "algo.group_size=4", "algo.minibatches=1", "sampling.max_new_tokens=8", "optim.warmup_steps=0",
        "optim.lr=0.01", "task.heldout_size=12", "train.eval_problems=12", "reward.kind=majority_vote",
        "task.test_time=true"]


def _state(extra=()):
    cfg = load_config(None, [*BASE, *extra])
    validate(cfg)
    torch.manual_seed(0)
    return build_state(cfg, TinyGPT(cfg.model, TOK.vocab_size), TOK)


def _ids(problems) -> list[str]:
    return sorted(p.id for p in problems)


def test_training_prompts_are_exactly_the_evaluation_problems(monkeypatch):
    st = _state()
    heldout = st.task.problems("heldout", 12)
    assert _ids(st.data.problems) == _ids(heldout)
    assert _ids(st.data.next(12)) == _ids(heldout)  # one epoch visits each of them once

    scored = []  # what the periodic held-out evaluation of the loop scores
    real = loop.verify_all
    monkeypatch.setattr(loop, "verify_all", lambda task, texts, problems, **kw: scored.extend(problems) or
                        real(task, texts, problems, **kw))
    heldout_pass_rate(st, st.cfg.train.eval_problems, seed=7)
    assert _ids(scored) == _ids(heldout)

    normal = _state(["task.test_time=false", "task.train_size=12"])  # not vacuous: the usual split differs
    assert not set(_ids(normal.data.problems)) & set(_ids(heldout))


class LengthAnswer:
    """Arithmetic problems with a verifier any random completion passes or fails: the extracted
    answer is the completion length mod 3, correct when it equals the problem's ``answer``."""

    def __init__(self, inner):
        self.inner = inner

    def problems(self, split, n=None):
        return self.inner.problems(split, n)

    def verify(self, completion, problem):
        a = str(len(completion) % 3)
        return Verdict(float(a == problem.answer), "right" if a == problem.answer else "wrong", a)


def test_ground_truth_answers_never_reach_the_reward_or_the_update():
    st = _state()
    st.task = LengthAnswer(st.task)
    other = copy.deepcopy(st)  # same weights, optimiser, data order and sampling RNG
    st.data.problems = [dataclasses.replace(p, answer=str(i % 3)) for i, p in enumerate(st.data.problems)]
    other.data.problems = [dataclasses.replace(p, answer=str((i + 1) % 3))
                           for i, p in enumerate(other.data.problems)]  # every label changed
    ms = [[rl_step(s, 3) for _ in range(3)] for s in (st, other)]
    assert [m["gt_accuracy"] for m in ms[0]] != [m["gt_accuracy"] for m in ms[1]]  # the labels do differ
    assert [m["reward"] for m in ms[0]] == [m["reward"] for m in ms[1]]
    assert any(0 < m["reward"] < 1 for m in ms[0])  # a real signal: some completions vote with the majority
    for a, b in zip(st.model.parameters(), other.model.parameters()):
        assert torch.equal(a, b)
    assert any(not torch.equal(a, b) for a, b in zip(st.model.parameters(),
                                                      _state().model.parameters()))  # and it did train


@pytest.mark.parametrize("extra, key", [
    (["reward.kind=verifier"], "reward.kind"),
    (["reward.kind=mix", "reward.weights={verifier: 1.0, self_certainty: 0.1}"], "reward.weights"),
    (["algo.npr_threshold=0.9"], "algo.npr_threshold"),
    (["algo.dynamic_sampling=true"], "algo.dynamic_sampling"),
    (["train.eval_problems=200"], "train.eval_problems"),
    (["task.heldout_size=0", "train.eval_problems=0"], "task.heldout_size"),
])
def test_label_leaks_and_mismatched_eval_sets_are_refused(extra, key):
    with pytest.raises(ConfigError, match=key):
        validate(load_config(None, [*BASE, *extra]))


def test_shipped_ttrl_config_is_test_time_and_valid():
    cfg = load_config("ttrl")
    validate(cfg)
    assert cfg.task.test_time and cfg.reward.kind == "majority_vote"
    assert cfg.train.eval_problems == cfg.task.heldout_size == 64
    validate(load_config(None, BASE[:-1] + ["reward.kind=verifier"]))  # verifier is fine without test_time


def test_no_positive_resampling_with_an_intrinsic_reward_warns_of_label_use():
    with pytest.warns(RuntimeWarning, match="npr_threshold"):
        validate(load_config("quickstart", ["reward.kind=self_certainty"]))


def test_vote_threshold_zeroes_groups_with_a_weak_majority():
    from rlvr.config import RewardConfig
    from rlvr.rewards.scoring import compute_rewards, reward_metrics
    from rlvr.types import Problem, RolloutBatch, ScoredBatch

    # group 0: "4" has 3 of 4 parsable votes (share 0.75); group 1: "1" has 2 of 4 (0.5)
    answers = ["4", "4", "4", "5", "1", "1", "2", "3"]
    verdicts = [Verdict(float(a in ("4", "1")), "right" if a in ("4", "1") else "wrong", a) for a in answers]
    z = torch.zeros(8, 1)
    rb = RolloutBatch(z.long(), z.bool(), z.long(), z.bool(), z.bool(), z, z, z.long(), ["eos"] * 8)
    for threshold, expected in ((0.0, [1, 1, 1, 0, 1, 1, 0, 0]), (0.6, [1, 1, 1, 0, 0, 0, 0, 0])):
        reward, truth, labels = compute_rewards(RewardConfig("majority_vote", vote_threshold=threshold), rb,
                                                verdicts, 4)
        assert reward.tolist() == expected and labels == ["4", "1"]
        batch = ScoredBatch(rb, verdicts, reward, truth, [Problem("a", "", "4"), Problem("b", "", "1")], 4, labels)
        diag = reward_metrics(batch, "majority_vote")
        assert diag["label_accuracy"] == 1.0  # the majority answer is still reported below the threshold
    with pytest.raises(ConfigError, match="reward.vote_threshold"):
        RewardConfig("self_certainty", vote_threshold=0.5)
    with pytest.raises(ConfigError, match="reward.vote_threshold"):
        RewardConfig("majority_vote", vote_threshold=1.5)
