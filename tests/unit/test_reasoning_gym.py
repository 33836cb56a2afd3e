"""reasoning-gym datasets as rlvr tasks, scored by their own scorer after answer normalisation."""

from __future__ import annotations

import pytest

pytest.importorskip("reasoning_gym")

from rlvr.errors import UserError  # noqa: E402
from rlvr.tasks.base import Problem  # noqa: E402
from rlvr.tasks.reasoning_gym import ReasoningGymTask, extract_rg_answer, normalize_answer  # noqa: E402


@pytest.fixture(scope="module")
def task() -> ReasoningGymTask:
    return ReasoningGymTask("basic_arithmetic", size=40, heldout_size=10, seed=7)


def _with_answer(task: ReasoningGymTask, answer: str) -> Problem:
    """A real problem whose entry's oracle answer is replaced by ``answer``."""
    p = task.problems("train", 1)[0]
    entry = {**p.meta["entry"], "answer": answer}
    return Problem(p.id, p.prompt, answer, p.solutions, {**p.meta, "entry": entry})


def test_problems_deterministic_and_disjoint(task: ReasoningGymTask) -> None:
    train, held = task.problems("train"), task.problems("heldout")
    assert len(train) + task.overlap_removed == 40 and len(held) == 10
    assert not {p.prompt for p in train} & {p.prompt for p in held}
    p = train[0]
    assert p.prompt.startswith("Calculate") and p.prompt.endswith("inside \\boxed{}.")
    assert p.meta["dataset"] == "basic_arithmetic" and p.meta["entry"]["answer"] == p.answer
    again = ReasoningGymTask("basic_arithmetic", size=40, heldout_size=10, seed=7)
    assert [q.answer for q in again.problems("train")] == [q.answer for q in train]
    assert task.verify(p.solutions[0], p).correct


def test_normalisation_gives_full_credit(task: ReasoningGymTask) -> None:
    p = _with_answer(task, "30")
    ds = task._datasets["train"]
    # the raw scorer gives only partial credit to these spellings ...
    assert ds.score_answer(" 30 ", p.meta["entry"]) < 1.0
    assert ds.score_answer("30.0", p.meta["entry"]) < 1.0
    # ... rlvr's normalisation gives full credit
    for completion in ["\\boxed{ 30 }", "\\boxed{30.0}", "<answer> 30 </answer>", "The answer is 30.0."]:
        v = task.verify(completion, p)
        assert (v.reward, v.status, v.answer) == (1.0, "right", "30"), completion
    assert task.verify("\\boxed{31}", p).reward == 0.0
    assert task.verify("\\boxed{300}", p).status == "wrong"
    assert task.verify("I give up", p).status == "no_answer"
    assert normalize_answer(" $-12.00$ ") == "-12" and normalize_answer("3.5") == "3.5"
    assert extract_rg_answer("<answer>1</answer> then \\boxed{2}") == "1"


def test_decimal_oracle_keeps_raw_match(task: ReasoningGymTask) -> None:
    p = _with_answer(task, "30.0")  # an oracle written as a decimal still matches the raw answer
    assert task.verify("\\boxed{30.0}", p).reward == 1.0


def test_unknown_dataset_is_a_user_error() -> None:
    with pytest.raises(UserError, match="did you mean 'basic_arithmetic'"):
        ReasoningGymTask("basic_arithmetik")
