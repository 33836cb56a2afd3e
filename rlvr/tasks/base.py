"""The task interface: problems with references, a prompt format, and a verifier.

A task is any object with the attributes of :class:`Task`. Verifiers return a
:class:`Verdict` with a parse status, so runs can count "no answer" and
"malformed" outputs separately from wrong ones. A task may define ``equivalent(a, b)``, its
rule for two extracted answers being the same (majority vote, label accuracy); use
:func:`answers_equivalent` / :func:`task_equivalence`, which fall back to stripped strings.
"""

from __future__ import annotations

from typing import Any, Protocol

from rlvr.types import STATUSES, Problem, Verdict, default_equivalent, task_equivalence

__all__ = ["STATUSES", "Problem", "Task", "Verdict", "answers_equivalent", "default_equivalent",
           "task_equivalence"]


class Task(Protocol):
    """What every task provides."""

    name: str

    def problems(self, split: str, n: int | None = None) -> list[Problem]:
        """Deterministic problems of ``split`` ("train" | "heldout"); the first n (all if None)."""
        ...

    def verify(self, completion: str, problem: Problem) -> Verdict:
        """Score one completion against the problem's reference. Never raises on model output."""
        ...

    def equivalent(self, a: str, b: str) -> bool:
        """Whether two extracted answers are the same answer under this task's rules (optional).

        Used to pool majority votes and to score label accuracy (majority label vs gold). Math
        tasks compare with math-verify ("0.5" == "1/2"), numeric tasks by value, string tasks
        exactly. Bounded and never raises on model output. A task without it gets
        :func:`default_equivalent` through :func:`answers_equivalent` / :func:`task_equivalence`.
        """
        ...


def answers_equivalent(task: Any, a: str, b: str) -> bool:
    """Whether answers ``a`` and ``b`` are equivalent under ``task``'s rules (see :func:`task_equivalence`)."""
    return bool(task_equivalence(task)(a, b))
