"""Verdicts of a claim from its per-seed estimates (pure; docs/commands/reproduce.md).

A claim expects a direction: ``positive`` (the measured quantity > 0) or ``negative`` (< 0). Each
seed gives an estimate with a 95% interval (lo, hi). The status of a claim is one of

- **reproduced**: the claimed direction holds beyond the interval in every seed (lo > 0 for
  positive, hi < 0 for negative);
- **not reproduced**: the opposite direction holds beyond the interval in every seed;
- **inconclusive**: otherwise (an interval covers 0, or the seeds disagree): the data were ambiguous;
- **not identifiable here**: the measured quantity does not exist on this testbed (fits that have not
  bent, a pair of runs that never crossed, a run that starts at its collapse threshold, too few
  checkpoints for a 95% interval...). The measure's registered rule computes the reason from the
  data; the verdict cell shows it;
- **not measured**: the claim's cells are missing, its model could not be built, or the measure
  cannot use its cells (the row says why).

A claim is a *finding* or a *premise* (a manipulation check: the regime the findings need, e.g. "the
high learning rate does destabilise GRPO"); premises get the same statuses but never count among
findings.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

EXPECTS = ("positive", "negative")
REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE = "reproduced", "not reproduced", "inconclusive"
NOT_IDENTIFIABLE, NOT_MEASURED = "not identifiable here", "not measured"
VERDICTS = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, NOT_IDENTIFIABLE, NOT_MEASURED)
CLAIM_KINDS = ("finding", "premise")
"""A finding is counted; a premise (manipulation check) is shown apart and never counted."""


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


def verdict(estimates: Sequence[Estimate], expect: str, unidentified: str = "") -> str:
    """The status (one of :data:`VERDICTS`, never ``not measured``: that is decided before any
    estimate exists) of per-seed ``estimates`` for a claim expecting ``expect``; ``unidentified``
    (a reason, '' for none): the quantity does not exist on this testbed -> not identifiable here."""
    if expect not in EXPECTS:
        raise ValueError(f"expect must be one of {EXPECTS}, got {expect!r}")
    if unidentified:
        return NOT_IDENTIFIABLE
    if not estimates:
        return INCONCLUSIVE
    want = 1 if expect == "positive" else -1
    sides = [side(e) for e in estimates]
    if all(s == want for s in sides):
        return REPRODUCED
    if all(s == -want for s in sides):
        return NOT_REPRODUCED
    return INCONCLUSIVE


def spread(estimates: Sequence[Estimate]) -> dict:
    """Mean, min and max of the seeds' values, and the number of seeds."""
    vals = [e.value for e in estimates]
    if not vals:
        return {"seeds": 0, "mean": None, "min": None, "max": None}
    return {"seeds": len(vals), "mean": statistics.fmean(vals), "min": min(vals), "max": max(vals)}
