"""Reward functions by name, and fault-isolated batch scoring.

A reward function is a plain function with the TRL signature::

    fn(prompts: list[str], completions: list[str], **columns) -> list[float | None]

``columns`` are per-completion dataset columns (lists of length B, e.g. ``answer``);
``completion_ids`` may be passed too; ``None`` means "no score for this completion".
TRL conversational completions (lists of ``{"role", "content"}`` messages) are accepted.

:func:`score_batch` runs any such function (one call per completion by default) in the
process pool of :mod:`rlvr.rewards.pool`: a call that raises, times out, returns the wrong
number of scores or a non-finite score gets ``failure_value`` and is counted; the result is
always one float per completion, in order. :func:`verify_batch` does the same for a task's
``verify(completion, problem) -> Verdict``.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Sequence
from typing import Any

from rlvr.errors import UserError
from rlvr.rewards.code import code_reward as run_code_tests
from rlvr.rewards.math import VERIFIERS, extract_answer
from rlvr.rewards.pool import CallResult, PoolStats, ScoringPool, get_pool
from rlvr.types import Problem, Verdict

RewardFn = Callable[..., list[float | None]]
_REWARDS: dict[str, RewardFn] = {}


def register_reward(name: str) -> Callable[[RewardFn], RewardFn]:
    """Decorator: register a TRL-signature reward function under ``name``."""

    def deco(fn: RewardFn) -> RewardFn:
        if name in _REWARDS and _REWARDS[name] is not fn:
            raise ValueError(f"reward {name!r} is already registered")
        _REWARDS[name] = fn
        return fn

    return deco


def available_rewards() -> list[str]:
    return sorted(_REWARDS)


def get_reward(name: str) -> RewardFn:
    """The reward function registered as ``name`` (UserError with a suggestion otherwise)."""
    if name not in _REWARDS:
        close = difflib.get_close_matches(name, _REWARDS, n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"choose one of {', '.join(available_rewards())}"
        raise UserError(f"unknown reward {name!r}; {hint}")
    return _REWARDS[name]


def completion_text(completion: Any) -> str:
    """Plain text of a completion: a string, or the last message of a TRL conversation."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content", ""))
    return str(completion)


def _by_verifier(kind: str) -> RewardFn:
    verify = VERIFIERS[kind]

    def reward(prompts: list[str], completions: list, answer: list[str], **_: Any) -> list[float | None]:
        return [verify(completion_text(c), str(a)).reward for c, a in zip(completions, answer)]

    reward.__name__ = f"{kind}_reward"
    reward.__doc__ = f"1.0 when the final answer passes the {kind!r} verifier against column ``answer``."
    return reward


math_reward = register_reward("math")(_by_verifier("math"))
numeric_reward = register_reward("numeric")(_by_verifier("numeric"))
exact_reward = register_reward("exact")(_by_verifier("exact"))


@register_reward("code")
def code_reward(prompts: list, completions: list, tests: list, **kwargs: Any) -> list[float | None]:
    """1.0 when the completion's code passes every test of column ``tests`` in the code sandbox
    (:func:`rlvr.rewards.code.code_reward`)."""
    return run_code_tests(prompts, completions, tests, **kwargs)


@register_reward("format")
def format_reward(prompts: list[str], completions: list, **_: Any) -> list[float | None]:
    """1.0 when a final answer can be extracted (boxed, ``####`` or "answer is"), else 0.0."""
    return [float(extract_answer(completion_text(c)) is not None) for c in completions]


# ----------------------------------------------------------------------------- scoring
def _as_score(value: Any, n: int) -> tuple[list[float | None] | None, str | None]:
    """Check one call's return value: a sequence (list, tuple, NumPy array, tensor: anything with
    ``tolist`` that gives a list) of n finite numbers or None."""
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        value = value.tolist()  # NumPy arrays and tensors, as TRL accepts them; a 0-d one is a scalar
    if not isinstance(value, (list, tuple)):
        return None, f"reward function returned {type(value).__name__}, expected a list of {n} scores"
    if len(value) != n:
        return None, f"reward function returned {len(value)} scores for {n} completions"
    out: list[float | None] = []
    for v in value:
        if v is None:
            out.append(None)
            continue
        try:
            f = float(v)
        except (TypeError, ValueError):
            return None, f"reward function returned a non-number ({type(v).__name__})"
        if not math.isfinite(f):
            return None, f"reward function returned a non-finite score ({f})"
        out.append(f)
    return out, None


def allowed_failures(n_calls: int, max_rate: float) -> int:
    """The most failed calls out of ``n_calls`` that stay within ``max_rate`` (a run stops past it:
    ``failures / n_calls > max_rate``)."""
    return int(max_rate * n_calls)


def _stats_dict(stats: PoolStats, n_none: int) -> dict:
    return {
        "n": stats.calls,
        "timeouts": stats.timeouts,
        "exceptions": stats.exceptions,
        "none": n_none,
        "skipped": stats.skipped,
        "errors": list(stats.errors),
        "wall_s": stats.wall_s,
    }


def _pool(pool: ScoringPool | None, workers: int) -> ScoringPool:
    return pool if pool is not None else (ScoringPool(0) if workers <= 0 else get_pool(workers))


def score_batch(
    fn: RewardFn,
    prompts: Sequence[str],
    completions: Sequence[Any],
    columns: dict[str, Sequence[Any]] | None = None,
    failure_value: float = 0.0,
    timeout_s: float | None = 5.0,
    workers: int = 2,
    per_sample: bool = True,
    pool: ScoringPool | None = None,
    none_value: float | None = None,
    max_failures: int | None = None,
) -> tuple[list[float], dict]:
    """Score B completions with a TRL-signature ``fn``; exactly one float per completion.

    ``fn`` is called with keyword arguments, as TRL does (``prompts=``, ``completions=``, one
    keyword per column), so ``def f(completions, **kwargs)`` works. ``per_sample=True`` calls
    ``fn`` once per completion (B calls spread over the pool,
    each bounded by ``timeout_s``); use ``per_sample=False`` for rewards that need the whole
    batch (majority vote), one call bounded by ``timeout_s``. Failures get ``failure_value``,
    ``None`` scores ``none_value`` (default: ``failure_value``; NaN marks them for TRL's
    rule). ``max_failures``: once more calls than this have raised or timed out, the rest are not
    run (they score ``failure_value`` and count in ``skipped``): a function that always hangs costs
    ``max_failures + 1`` timeouts, not B. Returns ``(rewards_B, stats)`` with ``stats`` keys ``n``,
    ``timeouts``, ``exceptions``, ``skipped``, ``none``, ``errors`` (first messages), ``wall_s``.
    """
    b = len(completions)
    columns = dict(columns or {})
    for k, v in columns.items():
        if len(v) != b:
            raise UserError(f"column {k!r} has {len(v)} values for {b} completions; pass one per completion")
    if len(prompts) != b:
        raise UserError(f"{len(prompts)} prompts for {b} completions; pass one prompt per completion")
    if per_sample:
        calls = [
            (
                (),
                {
                    "prompts": [prompts[i]],
                    "completions": [completions[i]],
                    **{k: [v[i]] for k, v in columns.items()},
                },
            )
            for i in range(b)
        ]
        sizes = [1] * b
    else:
        calls = [
            (
                (),
                {
                    "prompts": list(prompts),
                    "completions": list(completions),
                    **{k: list(v) for k, v in columns.items()},
                },
            )
        ]
        sizes = [b]
    results, stats = _pool(pool, workers).map_with_stats(fn, calls, timeout_s, max_failures)
    rewards: list[float] = []
    n_none = 0
    for res, size in zip(results, sizes):
        scores, err = _as_score(res.value, size) if res.ok else (None, None)
        if res.ok and scores is None:
            stats.add_error(err or "", timed_out=False)
        if scores is None:
            rewards.extend([failure_value] * size)
            continue
        n_none += sum(s is None for s in scores)
        none = failure_value if none_value is None else none_value
        rewards.extend(none if s is None else s for s in scores)
    return rewards, _stats_dict(stats, n_none)


def verify_batch(
    verify: Callable[[str, Problem], Verdict],
    completions: Sequence[str],
    problems: Sequence[Problem],
    failure_value: float = 0.0,
    timeout_s: float | None = 5.0,
    workers: int = 2,
    pool: ScoringPool | None = None,
) -> tuple[list[Verdict], dict]:
    """Run ``task.verify`` on B (completion, problem) pairs in the pool; one Verdict each.

    A call that fails or times out gets ``Verdict(failure_value, "malformed")``.
    """
    if len(completions) != len(problems):
        raise UserError(f"{len(completions)} completions for {len(problems)} problems; pass one problem each")
    calls = [((c, p), {}) for c, p in zip(completions, problems)]
    results, stats = _pool(pool, workers).map_with_stats(verify, calls, timeout_s)
    verdicts = [_as_verdict(r, failure_value, stats) for r in results]
    return verdicts, _stats_dict(stats, 0)


def _as_verdict(res: CallResult, failure_value: float, stats: PoolStats) -> Verdict:
    if res.ok and isinstance(res.value, Verdict) and math.isfinite(res.value.reward):
        return res.value
    if res.ok:
        stats.add_error(f"verify returned {res.value!r:.80}, expected a finite Verdict", timed_out=False)
    return Verdict(failure_value, "malformed")


def task_reward(task: Any) -> RewardFn:
    """A TRL-signature reward from ``task.verify``; needs a ``problem`` column of Problems."""

    def reward(prompts: list[str], completions: list, problem: list[Problem], **_: Any) -> list[float | None]:
        return [task.verify(completion_text(c), p).reward for c, p in zip(completions, problem)]

    reward.__name__ = f"{getattr(task, 'name', 'task')}_reward"
    return reward
