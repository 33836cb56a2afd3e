"""No-Positive-Resampling curriculum (ScaleRL, arXiv 2510.13786, docs/methods/scalerl.md).

A prompt whose historical pass rate (correct / total over all of its samples so
far) reaches the threshold (paper: 0.9) is retired: it is not sampled in any later
epoch. Retirement is permanent (a retired prompt is never sampled again, so its
rate could not recover anyway).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any


class PassRateTracker:
    """Historical pass rate per prompt id, and the set of retired prompts.

    threshold: a prompt with correct/total >= threshold is retired (0 < threshold <= 1).
    """

    def __init__(self, threshold: float = 0.9) -> None:
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"threshold must be in (0, 1], got {threshold}; e.g. use 0.9")
        self.threshold = float(threshold)
        self._correct: dict[str, int] = {}
        self._total: dict[str, int] = {}
        self._retired: set[str] = set()

    def update(self, prompt_ids: Sequence[str], correct_counts: Iterable, totals: Iterable) -> None:
        """Add one batch: for each prompt_ids[k], correct_counts[k] correct out of totals[k] samples.

        Counts may be ints or 0-dim / 1-D tensors (a (P,) tensor works). A prompt id may
        repeat within a call; its counts add up.
        """
        correct = [int(c) for c in correct_counts]
        total = [int(n) for n in totals]
        if not len(prompt_ids) == len(correct) == len(total):
            raise ValueError(
                f"update got {len(prompt_ids)} prompt ids, {len(correct)} correct counts and "
                f"{len(total)} totals; pass one count of each per prompt"
            )
        for pid, c, n in zip(prompt_ids, correct, total):
            if not 0 <= c <= n:
                raise ValueError(f"prompt {pid!r}: need 0 <= correct <= total, got {c} of {n}")
        for pid, c, n in zip(prompt_ids, correct, total):
            self._correct[pid] = self._correct.get(pid, 0) + c
            self._total[pid] = self._total.get(pid, 0) + n
        for pid in set(prompt_ids):
            rate = self.pass_rate(pid)
            if rate is not None and rate >= self.threshold:
                self._retired.add(pid)

    def pass_rate(self, pid: str) -> float | None:
        """Historical pass rate of a prompt, None if it has no samples yet."""
        total = self._total.get(pid, 0)
        return self._correct[pid] / total if total else None

    def is_retired(self, pid: str) -> bool:
        return pid in self._retired

    @property
    def retired(self) -> frozenset[str]:
        return frozenset(self._retired)

    def filter(self, pids: Iterable[str]) -> list[str]:
        """The prompt ids that are not retired, in their original order."""
        return [pid for pid in pids if pid not in self._retired]

    def state_dict(self) -> dict[str, Any]:
        """JSON-serialisable state (for checkpoints and resume)."""
        return {
            "threshold": self.threshold,
            "correct": dict(self._correct),
            "total": dict(self._total),
            "retired": sorted(self._retired),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what state_dict() returned (replaces the current state)."""
        missing = {"threshold", "correct", "total", "retired"} - set(state)
        if missing:
            raise ValueError(f"PassRateTracker state lacks {sorted(missing)}; pass a state_dict() result")
        self.threshold = float(state["threshold"])
        self._correct = {str(k): int(v) for k, v in state["correct"].items()}
        self._total = {str(k): int(v) for k, v in state["total"].items()}
        self._retired = {str(p) for p in state["retired"]}
