"""The order in which training prompts are visited: seeded epochs, resumable,
with No-Positive-Resampling (retired prompts are skipped in later epochs)."""

from __future__ import annotations

import random

from rlvr.log import warn
from rlvr.tasks.base import Problem


class PromptSampler:
    """Yields problems epoch by epoch in a seeded shuffled order; ``state_dict`` resumes exactly."""

    def __init__(self, problems: list[Problem], seed: int):
        if not problems:
            raise ValueError("no training problems")
        self.problems, self.seed = problems, seed
        self.epoch, self.pos = 0, 0
        self._order = self._shuffle(0)

    def _shuffle(self, epoch: int) -> list[int]:
        order = list(range(len(self.problems)))
        random.Random(self.seed * 1_000_003 + epoch).shuffle(order)
        return order

    def next(self, n: int, retired: frozenset[str] = frozenset()) -> list[Problem]:
        """The next ``n`` problems not in ``retired``; warns and repeats if fewer remain active."""
        active = len(self.problems) - len(retired)
        if active <= 0:
            warn("every training prompt is retired (No-Positive-Resampling); reusing all prompts")
            retired = frozenset()
        out: list[Problem] = []
        while len(out) < n:
            if self.pos >= len(self._order):
                self.epoch, self.pos = self.epoch + 1, 0
                self._order = self._shuffle(self.epoch)
            p = self.problems[self._order[self.pos]]
            self.pos += 1
            if p.id not in retired:
                out.append(p)
        return out

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "pos": self.pos, "seed": self.seed}

    def load_state_dict(self, d: dict) -> None:
        self.seed, self.epoch, self.pos = d["seed"], d["epoch"], d["pos"]
        self._order = self._shuffle(self.epoch)
