"""Verdicts of a claim from its per-seed estimates (pure; docs/commands/reproduce.md).

A claim expects a direction: ``positive`` (the measured quantity > 0) or ``negative`` (< 0), judged
against 0 or against a declared ``bound``: ``expect: positive, bound: -0.05`` is non-inferiority with a
margin of 0.05 (the quantity above -0.05), ``expect: negative, bound: -0.5`` says it falls below -0.5.
Each seed gives an estimate with a 95% interval (lo, hi). The status of a claim is one of

- **reproduced**: the claimed direction holds beyond the interval in every seed (lo > bound for
  positive, hi < bound for negative) and beyond the seed-level interval (:func:`seed_interval`: the
  mean over seeds with the between-seed variation in it);
- **not reproduced**: the opposite direction holds beyond the interval in every seed and beyond the
  seed-level interval;
- **inconclusive**: otherwise (an interval covers 0, or the seeds disagree): the data were ambiguous;
- **not identifiable here**: the measured quantity does not exist on this testbed (fits that have not
  bent, a pair of runs that never crossed, a run that starts at its collapse threshold, too few
  checkpoints for a 95% interval...). The measure's registered rule computes the reason from the
  data; the verdict cell shows it;
- **not measured**: the claim's cells are missing, its model could not be built, or the measure
  cannot use its cells (the row says why).

A claim is a *finding*, a *premise* (a manipulation check: the regime the findings need, e.g. "the
high learning rate does destabilise GRPO") or *exploratory* (declared after its data were seen, to
say what they can answer); premises and exploratory claims get the same statuses but never count
among findings.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import t as student_t

from rlvr.eval.passk import bootstrap_ci

EXPECTS = ("positive", "negative")
REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE = "reproduced", "not reproduced", "inconclusive"
NOT_IDENTIFIABLE, NOT_MEASURED = "not identifiable here", "not measured"
VERDICTS = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, NOT_IDENTIFIABLE, NOT_MEASURED)
CLAIM_KINDS = ("finding", "premise", "exploratory")
"""A finding is counted; a premise (manipulation check) is shown apart and never counted; an
exploratory claim is declared on data already seen (post hoc by declaration: shown, never counted)."""


def seed_label(seed: int | None, pretrain: int | None = None) -> str:
    """``s0``, ``s1``... or ``shared`` (a model trained once for every seed, e.g. the base); with a
    pretraining seed, ``p1-s0`` (``p1`` for a model shared by the RL seeds of that pretraining seed)."""
    rl = "shared" if seed is None else f"s{seed}"
    if pretrain is None:
        return rl
    return f"p{pretrain}" if seed is None else f"p{pretrain}-{rl}"


@dataclass(frozen=True)
class Estimate:
    """One seed's value of a claim's quantity with its 95% interval (``pretrain``: the pretraining
    seed of the models it compares, in an experiment that declares several)."""

    seed: int | None
    value: float
    lo: float
    hi: float
    pretrain: int | None = None

    @property
    def label(self) -> str:
        """:func:`seed_label` of this estimate's seeds."""
        return seed_label(self.seed, self.pretrain)


def problem_estimate(seed: int | None, per_problem: np.ndarray, boot_seed: int = 0) -> Estimate:
    """One seed's estimate from per-problem values ``per_problem`` (P,): their mean with the percentile
    bootstrap interval over problems (``boot_seed`` seeds the draws); no problems (P = 0) gives NaNs,
    which the verdict reads as inconclusive."""
    if per_problem.size == 0:
        return Estimate(seed, float("nan"), float("nan"), float("nan"))
    lo, hi = bootstrap_ci(per_problem, seed=boot_seed)
    return Estimate(seed, float(per_problem.mean()), float(lo), float(hi))


def side(e: Estimate, bound: float = 0.0) -> int:
    """+1 when the interval lies above ``bound``, -1 when below, 0 when it covers it."""
    return 1 if e.lo > bound else -1 if e.hi < bound else 0


def verdict(estimates: Sequence[Estimate], expect: str, unidentified: str = "", bound: float = 0.0) -> str:
    """The status (one of :data:`VERDICTS`, never ``not measured``: that is decided before any
    estimate exists) of per-seed ``estimates`` for a claim expecting ``expect`` of the quantity
    against ``bound`` (0: its sign; ``positive`` with bound -m: non-inferiority with margin m, *not
    reproduced* when every upper end is below -m); ``unidentified`` (a reason, '' for none): the
    quantity does not exist on this testbed -> not identifiable here."""
    if expect not in EXPECTS:
        raise ValueError(f"expect must be one of {EXPECTS}, got {expect!r}")
    if unidentified:
        return NOT_IDENTIFIABLE
    if not estimates:
        return INCONCLUSIVE
    want = 1 if expect == "positive" else -1
    sides = [side(e, bound) for e in estimates] + [side(seed_interval(estimates), bound)]
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


def seed_interval(estimates: Sequence[Estimate], level: float = 0.95) -> Estimate:
    """The seed-level estimate: the mean over seeds with a ``level`` interval that carries the
    between-seed variation (docs/commands/reproduce.md, "The unit of replication").

    Replicates are the top level of the hierarchy: the pretraining seeds when the estimates carry
    several (each the mean of its RL seeds), else the RL seeds. With n of them, the interval is
    mean +- sqrt((t s / sqrt n)^2 + h^2): t the Student quantile with n - 1 degrees of freedom, s the
    sd of the replicates' values, h the mean half-width of the per-seed intervals (their problem,
    tensor or step resampling: the seeds share their problems, so that error does not average out).
    One shared estimate (a model trained once, or a measure that already resamples seeds) is its own
    seed-level estimate; a single seeded replicate cannot show between-seed variation: no interval."""
    if not estimates:
        return Estimate(None, math.nan, math.nan, math.nan)
    if len(estimates) == 1 and estimates[0].seed is None and estimates[0].pretrain is None:
        return estimates[0]
    groups: dict[int | None, list[Estimate]] = {}
    for e in estimates:
        groups.setdefault(e.pretrain, []).append(e)
    units = ([statistics.fmean(e.value for e in g) for g in groups.values()] if len(groups) > 1
             else [e.value for e in estimates])
    mean = statistics.fmean(units)
    if len(units) < 2 or not all(math.isfinite(v) for v in units):
        return Estimate(None, mean, math.nan, math.nan)
    between = student_t.ppf(0.5 + level / 2, len(units) - 1) * statistics.stdev(units) / math.sqrt(len(units))
    halves = [(e.hi - e.lo) / 2 for e in estimates]
    within = statistics.fmean(halves) if all(math.isfinite(h) for h in halves) else math.nan
    half = math.sqrt(between ** 2 + within ** 2)
    return Estimate(None, mean, mean - half, mean + half)
