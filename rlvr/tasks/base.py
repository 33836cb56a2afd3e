"""The task interface: problems with references, a prompt format, and a verifier.

A task is any object with the attributes of :class:`Task`. Verifiers return a
:class:`Verdict` with a parse status, so runs can count "no answer" and
"malformed" outputs separately from wrong ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

STATUSES = ("no_answer", "malformed", "wrong", "right")


@dataclass(frozen=True)
class Problem:
    """One verifiable problem.

    ``prompt`` is the exact text fed to the model; ``solutions`` are gold
    completions (worked traces ending in the task's answer format), possibly
    several distinct ones; ``answer`` is the reference final answer.
    """

    id: str
    prompt: str
    answer: str
    solutions: tuple[str, ...] = ()
    meta: dict = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True)
class Verdict:
    """A verifier's judgement of one completion."""

    reward: float
    status: str  # one of STATUSES
    answer: str | None = None  # the extracted final answer, if any

    @property
    def correct(self) -> bool:
        return self.status == "right"


class Task(Protocol):
    """What every task provides."""

    name: str

    def problems(self, split: str, n: int | None = None) -> list[Problem]:
        """Deterministic problems of ``split`` ("train" | "heldout"); the first n (all if None)."""
        ...

    def verify(self, completion: str, problem: Problem) -> Verdict:
        """Score one completion against the problem's reference. Never raises on model output."""
        ...
