"""The task interface: problems with references, a prompt format, and a verifier.

A task is any object with the attributes of :class:`Task`. Verifiers return a
:class:`Verdict` with a parse status, so runs can count "no answer" and
"malformed" outputs separately from wrong ones.
"""

from __future__ import annotations

from typing import Protocol

from rlvr.types import STATUSES, Problem, Verdict

__all__ = ["STATUSES", "Problem", "Task", "Verdict"]


class Task(Protocol):
    """What every task provides."""

    name: str

    def problems(self, split: str, n: int | None = None) -> list[Problem]:
        """Deterministic problems of ``split`` ("train" | "heldout"); the first n (all if None)."""
        ...

    def verify(self, completion: str, problem: Problem) -> Verdict:
        """Score one completion against the problem's reference. Never raises on model output."""
        ...
