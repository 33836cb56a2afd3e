"""Verdicts of a claim from its per-seed estimates (pure; docs/commands/reproduce.md).

A claim expects a direction: ``positive`` (the measured quantity > 0) or ``negative`` (< 0). Each
seed gives an estimate with a 95% interval (lo, hi). The verdict is

- **reproduced**: the claimed direction holds beyond the interval in every seed (lo > 0 for
  positive, hi < 0 for negative);
- **not reproduced**: the opposite direction holds beyond the interval in every seed;
- **inconclusive**: otherwise (an interval covers 0, or the seeds disagree), and whenever the measure
  withholds a direction (its quantity is not identified by the data, e.g. curve parameters read off
  fits that have not bent; the page says why).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

EXPECTS = ("positive", "negative")
VERDICTS = ("reproduced", "not reproduced", "inconclusive")


def seed_label(seed: int | None) -> str:
    """``s0``, ``s1``... or ``shared`` (a model trained once for every seed, e.g. the base)."""
    return "shared" if seed is None else f"s{seed}"


@dataclass(frozen=True)
class Estimate:
    """One seed's value of a claim's quantity with its 95% interval."""

    seed: int | None
    value: float
    lo: float
    hi: float

    @property
    def label(self) -> str:
        """:func:`seed_label` of this estimate's seed."""
        return seed_label(self.seed)


def side(e: Estimate) -> int:
    """+1 when the interval lies above 0, -1 when below, 0 when it covers 0."""
    return 1 if e.lo > 0 else -1 if e.hi < 0 else 0


def verdict(estimates: Sequence[Estimate], expect: str, withheld: str = "") -> str:
    """The verdict (one of :data:`VERDICTS`) of per-seed ``estimates`` for a claim expecting ``expect``;
    ``withheld`` (a reason, '' for none): the measure cannot decide a direction -> inconclusive."""
    if expect not in EXPECTS:
        raise ValueError(f"expect must be one of {EXPECTS}, got {expect!r}")
    if not estimates or withheld:
        return "inconclusive"
    want = 1 if expect == "positive" else -1
    sides = [side(e) for e in estimates]
    if all(s == want for s in sides):
        return "reproduced"
    if all(s == -want for s in sides):
        return "not reproduced"
    return "inconclusive"


def spread(estimates: Sequence[Estimate]) -> dict:
    """Mean, min and max of the seeds' values, and the number of seeds."""
    vals = [e.value for e in estimates]
    if not vals:
        return {"seeds": 0, "mean": None, "min": None, "max": None}
    return {"seeds": len(vals), "mean": statistics.fmean(vals), "min": min(vals), "max": max(vals)}
