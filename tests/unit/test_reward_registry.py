"""Reward registry, TRL-signature rewards and fault-isolated batch scoring."""

from __future__ import annotations

import os
import threading
import time

import pytest

from rlvr.errors import UserError
from rlvr.rewards.pool import ScoringPool
from rlvr.rewards.registry import (
    available_rewards,
    completion_text,
    get_reward,
    register_reward,
    score_batch,
    task_reward,
    verify_batch,
)
from rlvr.tasks.base import Problem, Verdict


# module-level so that they are picklable under any start method
def trl_len_reward(completions, **kwargs):
    """Written exactly as in TRL's docs: only ``completions`` plus ``**kwargs``."""
    return [-abs(5 - len(c)) for c in completions]


def flaky_reward(prompts, completions, **kwargs):
    c = completions[0]
    if c == "boom":
        raise RuntimeError("kaboom on purpose")
    if c == "slow":
        time.sleep(60)
    if c == "none":
        return [None]
    if c == "nan":
        return [float("nan")]
    if c == "two":
        return [1.0, 1.0]
    return [float(len(c))]


def majority_reward(prompts, completions, **kwargs):
    """Group-level: 1 for completions equal to the most common one (needs the whole batch)."""
    top = max(set(completions), key=completions.count)
    return [float(c == top) for c in completions]


class _Task:
    name = "toy"

    def verify(self, completion: str, problem: Problem) -> Verdict:
        if completion == "hang":
            time.sleep(60)
        if completion == "raise":
            raise ValueError("bad verifier")
        ok = completion.strip() == problem.answer
        return Verdict(float(ok), "right" if ok else "wrong", completion.strip())


def test_registry_lookup_and_errors() -> None:
    assert {"math", "numeric", "exact", "format"} <= set(available_rewards())
    with pytest.raises(UserError, match="did you mean 'math'"):
        get_reward("maths")

    @register_reward("test_const_reward")
    def const(prompts, completions, **kw):
        return [0.25] * len(completions)

    assert get_reward("test_const_reward") is const
    with pytest.raises(ValueError, match="already registered"):
        register_reward("test_const_reward")(trl_len_reward)


def test_builtin_rewards_trl_signature_and_conversational() -> None:
    math = get_reward("math")
    got = math(prompts=["p"] * 3, completions=["\\boxed{0.5}", "\\boxed{2}", "no"], answer=["\\frac12"] * 3)
    assert got == [1.0, 0.0, 0.0]
    conv = [[{"role": "assistant", "content": "#### 1,000"}]]
    assert get_reward("numeric")(prompts=["p"], completions=conv, answer=["1000"]) == [1.0]
    assert completion_text([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]) == "b"
    assert get_reward("format")(["p", "p"], ["\\boxed{1}", "nothing"]) == [1.0, 0.0]


def test_trl_reward_runs_unchanged_in_pool() -> None:
    comps = ["abcde", "ab", "abcdefgh"]
    rewards, stats = score_batch(trl_len_reward, ["p"] * 3, comps, {"completion_ids": [[1], [2], [3]]})
    assert rewards == [0.0, -3.0, -3.0]
    assert stats["timeouts"] == 0 and stats["exceptions"] == 0 and stats["n"] == 3


def test_failures_are_isolated_per_sample_and_counted() -> None:
    comps = ["abc", "boom", "none", "nan", "two", "abcd", "slow", "x"]
    t0 = time.perf_counter()
    rewards, stats = score_batch(flaky_reward, ["p"] * 8, comps, failure_value=-1.0, timeout_s=1.0, workers=2)
    assert time.perf_counter() - t0 < 15
    assert rewards == [3.0, -1.0, -1.0, -1.0, -1.0, 4.0, -1.0, 1.0]
    assert stats["timeouts"] == 1
    assert stats["exceptions"] == 3  # raise, nan, wrong length
    assert stats["none"] == 1
    joined = " | ".join(stats["errors"])
    assert "kaboom on purpose" in joined and "2 scores for 1" in joined and "non-finite" in joined


def test_lambda_and_closure_work_and_in_process_mode() -> None:
    offset = 10.0
    fn = lambda prompts, completions, **kw: [offset + len(c) for c in completions]  # noqa: E731
    assert score_batch(fn, ["p", "q"], ["a", "bb"])[0] == [11.0, 12.0]
    rewards, stats = score_batch(flaky_reward, ["p", "p"], ["boom", "ab"], workers=0)
    assert rewards == [0.0, 2.0] and stats["exceptions"] == 1


def test_batch_mode_for_group_rewards_and_length_checks() -> None:
    comps = ["7", "7", "3", "7"]
    rewards, _ = score_batch(majority_reward, ["p"] * 4, comps, per_sample=False)
    assert rewards == [1.0, 1.0, 0.0, 1.0]
    rewards, stats = score_batch(lambda **kw: [1.0], ["p"] * 4, comps, per_sample=False, failure_value=-2.0)
    assert rewards == [-2.0] * 4 and stats["exceptions"] == 1
    with pytest.raises(UserError, match="column 'answer' has 1 values for 2"):
        score_batch(trl_len_reward, ["p", "p"], ["a", "b"], {"answer": ["1"]})


def test_verify_batch_with_task_verify_from_a_thread() -> None:
    task = _Task()
    probs = [Problem(str(i), "q", str(i)) for i in range(5)]
    comps = ["0", "hang", "2", "raise", "9"]
    out: dict = {}
    th = threading.Thread(target=lambda: out.update(r=verify_batch(task.verify, comps, probs, timeout_s=1.0)))
    th.start()
    th.join(30)
    assert not th.is_alive()
    verdicts, stats = out["r"]
    assert [v.reward for v in verdicts] == [1.0, 0.0, 1.0, 0.0, 0.0]
    assert [v.status for v in verdicts] == ["right", "malformed", "right", "malformed", "wrong"]
    assert stats["timeouts"] == 1 and stats["exceptions"] == 1
    assert task_reward(task)(["q"], ["2"], problem=[probs[2]]) == [1.0]


def test_pool_replaces_killed_worker_and_keeps_order() -> None:
    pool = ScoringPool(2)
    try:
        res = pool.map(os.getpid, [((), {})] * 4, timeout_s=5.0)
        assert all(r.ok for r in res) and len({r.value for r in res}) <= 2
        res = pool.map(time.sleep, [((0.0,), {}), ((30,), {}), ((0.0,), {})], timeout_s=0.5)
        assert [r.ok for r in res] == [True, False, True] and res[1].timed_out
        after = pool.map(os.getpid, [((), {})] * 4, timeout_s=5.0)
        assert all(r.ok for r in after)
    finally:
        pool.close()
