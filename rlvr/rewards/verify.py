"""Verification of model outputs, isolated from the caller: every completion gets a Verdict.

A verifier that raises, returns something other than a finite :class:`Verdict`, or runs past its
timeout (in a :mod:`rlvr.rewards.pool` worker process, killed and replaced) scores the failure
value and is reported, never raised: the trainer decides what to do with the failures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from rlvr.problems import Problem, Verdict
from rlvr.rewards.pool import get_pool

# Built-in synthetic tasks whose verifiers are bounded regex/integer checks: scored in-process.
FAST_VERIFY_MODULES = frozenset({"rlvr.tasks.arithmetic", "rlvr.tasks.countdown", "rlvr.tasks.strings",
                                 "rlvr.tasks.docrecon"})


@dataclass
class VerifyReport:
    """Verdicts of B completions plus the rows whose verifier failed (raised, timed out, bad return)."""

    verdicts: list[Verdict]
    failures: list[tuple[int, str]] = field(default_factory=list)  # (row, "TypeError: ..." | "timeout ...")

    @property
    def timeouts(self) -> int:
        return sum(msg.startswith("timeout") for _, msg in self.failures)


def needs_timeout(task) -> bool:
    """True unless ``task`` is a built-in synthetic task (exact class) or sets ``fast_verify = True``."""
    return type(task).__module__ not in FAST_VERIFY_MODULES and not getattr(task, "fast_verify", False)


def _checked(v, row: int, failure_value: float, failures: list) -> Verdict:
    if isinstance(v, Verdict) and math.isfinite(v.reward):
        return v
    failures.append((row, f"verifier returned {v!r:.80}, expected a Verdict with a finite reward"))
    return Verdict(failure_value, "malformed", None)


def verify_checked(task, texts: list[str], problems: list[Problem], *, failure_value: float = 0.0,
                   timeout_s: float | None = None, workers: int = 2, max_failures: int | None = None,
                   ) -> VerifyReport:
    """One verdict per completion, in order; never raises on a verifier failure.

    A task with ``verify_many(texts, problems) -> list[Verdict]`` (one that bounds and parallelises
    its own calls, e.g. the code sandbox tasks) is called once for the batch; if it raises, every
    row fails with its message. Otherwise a verifier that raises, returns something other than a
    finite Verdict, or (when ``timeout_s`` is set and :func:`needs_timeout`) runs past ``timeout_s``
    seconds in the
    :mod:`rlvr.rewards.pool` worker (killed and replaced) gets ``Verdict(failure_value,
    "malformed")`` and is listed in ``failures`` with the exception text. ``max_failures`` (the
    pool path): once more calls than this have failed, the rest are not run and fail too (a
    verifier that always hangs costs ``max_failures + 1`` timeouts, not one per completion).
    """
    failures: list[tuple[int, str]] = []
    out: list[Verdict] = []
    if hasattr(task, "verify_many") and texts:  # the task bounds and parallelises its own calls
        try:
            verdicts = list(task.verify_many(list(texts), list(problems)))
        except Exception as e:  # noqa: BLE001 - a verifier bug must not kill the run
            verdicts = [f"{type(e).__name__}: {e}"[:300]] * len(texts)
        if len(verdicts) != len(texts):
            verdicts = [f"verify_many returned {len(verdicts)} verdicts for {len(texts)} completions"] * len(texts)
        for i, v in enumerate(verdicts):
            if isinstance(v, str):
                failures.append((i, v))
                out.append(Verdict(failure_value, "malformed", None))
            else:
                out.append(_checked(v, i, failure_value, failures))
        return VerifyReport(out, failures)
    if timeout_s and needs_timeout(task) and texts:
        results = get_pool(workers).map(task.verify, [((t, p), {}) for t, p in zip(texts, problems)], timeout_s,
                                        max_failures)
        for i, r in enumerate(results):
            if r.ok:
                out.append(_checked(r.value, i, failure_value, failures))
            else:
                failures.append((i, r.error or "unknown error"))
                out.append(Verdict(failure_value, "malformed", None))
        return VerifyReport(out, failures)
    for i, (text, prob) in enumerate(zip(texts, problems)):
        try:
            out.append(_checked(task.verify(text, prob), i, failure_value, failures))
        except Exception as e:  # noqa: BLE001 - a verifier bug must not kill the run
            failures.append((i, f"{type(e).__name__}: {e}"[:300]))
            out.append(Verdict(failure_value, "malformed", None))
    return VerifyReport(out, failures)


def verify_all(task, texts: list[str], problems: list[Problem], *, failure_value: float = 0.0,
               timeout_s: float | None = None) -> list[Verdict]:
    """The verdicts of :func:`verify_checked` (failures scored ``failure_value``, not reported)."""
    return verify_checked(task, texts, problems, failure_value=failure_value, timeout_s=timeout_s).verdicts
