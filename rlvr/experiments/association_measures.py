"""Measures that correlate one quantity with another across pretraining checkpoints and seeds, for
the claims "the base checkpoint's pass@k predicts RL's gain" (RL excursions) and "the collapse step
of an intrinsic-reward run predicts supervised RL's gain from the same checkpoint" (unsupervised
RLVR); formulas: docs/methods/unsupervised_rlvr.md and docs/methods/excursions.md.

A unit is one (checkpoint, seed). ``pairs`` lists, per checkpoint, the models that describe it:

- ``gain_association`` (eval, pairs: [[rl, start], ...], k = 1, gain_k = 1, stat = r): x = the start
  checkpoint's pass@k, y = the RL model's pass@gain_k minus the start's (per seed).
- ``collapse_association`` (eval, dynamics, pairs: [[intrinsic, rl, start], ...], gain_k = 1, window = 3,
  threshold = 0.01, stat = r): x = the collapse step of the intrinsic-reward run (first step whose
  trailing mean reward accuracy is below the threshold; a run that never collapses counts at its
  last step + 1, censored, and the details count them), y = the supervised RL model's gain as above.

The estimate is Pearson's r (``stat: rho``: Spearman's) with a bootstrap interval that resamples
whole checkpoints (the seeds of one checkpoint share its x, or its base) unless ``cluster: false``.
The details add an exact permutation test over checkpoints (:func:`permutation_p`: the checkpoints'
x values permuted among them, every permutation, the share whose r is at least as far from 0 in the
observed direction). It is not identifiable here (:func:`too_few_clusters`) when the resampled
units are too few for a 95% percentile interval: G checkpoints drawn G times with replacement give
at most C(2G - 1, G) distinct resamples, and a 2.5% tail needs at least 40 of them (G >= 5; 3
checkpoints give 10).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from itertools import permutations
from math import comb

import numpy as np

from rlvr.analysis.association import associate, pearson
from rlvr.analysis.collapse import analyse_run, collapse_step
from rlvr.errors import UserError
from rlvr.experiments.cells import cell_passk
from rlvr.experiments.registry import Args, Measure, one_of, register
from rlvr.experiments.verdict import Estimate, seed_label

ALPHA = 0.05


def distinct_resamples(units: int) -> int:
    """How many distinct multisets a bootstrap of ``units`` units drawn ``units`` times can take:
    C(2n - 1, n) (n = 3: 10; n = 5: 126)."""
    return comb(2 * units - 1, units) if units > 0 else 0


def too_few_clusters(args: dict, estimates, details: dict) -> str:
    """Why an association's 95% interval is not identified ('' when it is): fewer distinct bootstrap
    resamples than 2 / alpha = 40, so the percentile bounds are single resamples, not tails."""
    clustered = args["cluster"]
    units = len(args["pairs"]) if clustered else int(details.get("units", 0))
    need = round(2 / ALPHA)
    if distinct_resamples(units) >= need:
        return ""
    what = "checkpoints" if clustered else "units"
    return (f"{units} {what}: the bootstrap over {what} has at most {distinct_resamples(units)} distinct resamples, "
            f"and a 95% interval needs at least {need} (5 or more {what})")


def passk(stats: dict, k: int) -> float:
    """Mean over problems of the unbiased pass@k of a samples cell."""
    n = stats["n"]
    if not 1 <= k <= n:
        raise UserError(f"k={k} is outside 1..n={n}")
    return float(cell_passk(stats, [k])[:, 0].mean())


def _gain(get, ev: str, rl: str, start: str, s, k: int) -> float:
    m, b = get(ev, rl, s), get(ev, start, None)
    if m["ids"] != b["ids"]:
        raise UserError(f"{rl} and {start} were evaluated on different problems")
    return passk(m, k) - passk(b, k)


def permutation_p(x: list, y: list, groups: list) -> float:
    """One-sided p of Pearson's r over every permutation of the groups' x values among the groups
    (a group's units share its x): the share of permutations whose r is at least the observed one
    in the observed direction (itself included); nan for more than 8 groups (40,320 permutations) or
    an undefined r."""
    ids = list(dict.fromkeys(groups))
    if len(ids) > 8:
        return float("nan")
    gx = {g: x[groups.index(g)] for g in ids}
    observed = pearson(np.asarray(x, float), np.asarray(y, float))
    if not np.isfinite(observed):
        return float("nan")
    sign = 1.0 if observed >= 0 else -1.0
    hits = total = 0
    for perm in permutations(ids):
        moved = dict(zip(ids, (gx[g] for g in perm)))
        r = pearson(np.asarray([moved[g] for g in groups], float), np.asarray(y, float))
        total += 1
        hits += bool(np.isfinite(r) and sign * r >= sign * observed - 1e-12)
    return hits / total


def association_estimate(args: dict, x: list, y: list, groups: list) -> tuple[list[Estimate], dict]:
    a = associate(x, y, groups if args["cluster"] else None)
    if args["stat"] == "rho":
        value, lo, hi = a.rho, a.rho_low, a.rho_high
    else:
        value, lo, hi = a.r, a.r_low, a.r_high
    return [Estimate(None, value, lo, hi)], {"units": a.n, "r": a.r, "r_interval": [a.r_low, a.r_high],
                                             "rho": a.rho, "rho_interval": [a.rho_low, a.rho_high],
                                             "permutation_p": permutation_p(x, y, groups)}


def gain_association(get, args: dict, seeds, against_seeds):
    k, gk = int(args["k"]), int(args["gain_k"])
    x, y, groups, points = [], [], [], {}
    for i, (rl, start) in enumerate(args["pairs"]):
        base_k = passk(get(args["eval"], start, None), k)
        for s in seeds:
            g = _gain(get, args["eval"], rl, start, s, gk)
            x.append(base_k)
            y.append(g)
            groups.append(i)
            points[f"{rl} {seed_label(s)}"] = {"x": base_k, "y": g}
    est, details = association_estimate(args, x, y, groups)
    return est, {**details, "x": f"pass@{k} of the start", "y": f"gain in pass@{gk}", "points": points}


def collapse_step_of(stats: dict, window: int, threshold: float) -> tuple[float, bool]:
    """(collapse step, collapsed) of a dynamics cell's series; a run that never collapses -> (last
    step + 1, False)."""
    series = stats.get("series") if stats.get("kind") == "dynamics" else None
    if series is None or "reward_accuracy" not in series:
        raise UserError("collapse_association needs a `kind: dynamics` evaluation of the intrinsic-reward runs")
    rows = [{"step": s, "reward_accuracy": r} for s, r in zip(series["step"], series["reward_accuracy"])]
    res = analyse_run(rows, window=window, threshold=threshold)
    return (float(res.collapse_step), True) if res.collapsed else (float(res.final_step + 1), False)


@dataclass(frozen=True)
class Collapse:
    """One run's collapse: ``step`` (its last step + 1 when it never collapsed), ``collapsed``, the
    ``start`` (mean reward accuracy of its first ``window`` steps), the ``threshold`` used and
    ``draws`` (D,): the collapse step of each parametric-bootstrap replicate (empty without one)."""

    step: float
    collapsed: bool
    start: float
    threshold: float
    draws: np.ndarray


def reward_accuracy_series(stats: dict) -> tuple[list[int], np.ndarray]:
    """(steps, reward accuracy (N,)) of a dynamics cell, the steps that logged one."""
    series = stats.get("series") if stats.get("kind") == "dynamics" else None
    if series is None or "reward_accuracy" not in series:
        raise UserError("a collapse measure needs a `kind: dynamics` evaluation of intrinsic-reward runs")
    pts = [(s, r) for s, r in zip(series["step"], series["reward_accuracy"]) if r is not None]
    if not pts:
        raise UserError("the run logged no reward accuracy (an intrinsic-reward run logs it every step)")
    steps, ra = zip(*pts)
    return list(steps), np.asarray(ra, dtype=np.float64)


def _first_below(steps: list[int], ra: np.ndarray, window: int, threshold: float) -> tuple[float, bool]:
    step = collapse_step(steps, ra, window, threshold)
    return (float(step), True) if step is not None else (float(steps[-1] + 1), False)


def collapse_with_draws(stats: dict, window: int, threshold: float, relative: float = 0.0, units: int = 0,
                        draws: int = 1000, seed: int | None = None) -> Collapse:
    """The collapse of a run (the first step whose trailing mean of ``window`` reward accuracies is below
    the threshold): ``threshold`` itself, or with ``relative`` > 0, ``relative`` x the run's start (the
    mean of its first ``window`` points, so never met at the start unless the start is 0). With ``units``
    > 0, ``draws`` parametric-bootstrap replicates: every step's reward accuracy redrawn as
    Binomial(units, its value) / units (a share of ``units`` groups or rollouts), the start, threshold
    and collapse step found again in each: the interval of a collapse step over the batches' sampling.
    ``seed`` (default: a checksum of the run's series) seeds the draws: two runs' batches are
    independent, so their draws must not share random numbers (which would narrow a difference's
    interval), and one run's draws are the same every time."""
    steps, ra = reward_accuracy_series(stats)

    def thr_of(series: np.ndarray) -> float:
        return relative * float(series[:window].mean()) if relative > 0 else threshold

    step, collapsed = _first_below(steps, ra, window, thr_of(ra))
    sims = np.empty(0)
    if units > 0:
        rng = np.random.default_rng(zlib.crc32(ra.tobytes()) if seed is None else seed)
        redrawn = rng.binomial(units, np.clip(ra, 0.0, 1.0), size=(draws, ra.size)) / units
        sims = np.array([_first_below(steps, r, window, thr_of(r))[0] for r in redrawn])
    return Collapse(step, collapsed, float(ra[:window].mean()), thr_of(ra), sims)


def collapse_association(get, args: dict, seeds, against_seeds):
    gk, window, thr = int(args["gain_k"]), int(args["window"]), float(args["threshold"])
    x, y, groups, points, censored = [], [], [], {}, 0
    for i, (intrinsic, rl, start) in enumerate(args["pairs"]):
        for s in seeds:
            step, collapsed = collapse_step_of(get(args["dynamics"], intrinsic, s), window, thr)
            censored += not collapsed
            g = _gain(get, args["eval"], rl, start, s, gk)
            x.append(step)
            y.append(g)
            groups.append(i)
            points[f"{intrinsic} {seed_label(s)}"] = {"collapse_step": step, "collapsed": collapsed, "gain": g}
    est, details = association_estimate(args, x, y, groups)
    return est, {**details, "censored": censored, "points": points}


STATS = ("r", "rho")


@dataclass(frozen=True, kw_only=True)
class AssociationArgs(Args):
    pairs: tuple[tuple[str, ...], ...]
    """Per checkpoint, the models that describe it (see the module docstring)."""
    gain_k: int = 1
    """The gain is in pass@gain_k."""
    stat: str = "r"
    """r (Pearson) | rho (Spearman)."""
    cluster: bool = True
    """Resample whole checkpoints (their seeds share the checkpoint's x)."""

    def __post_init__(self):
        one_of(self.stat, STATS, "stat")


@dataclass(frozen=True, kw_only=True)
class GainArgs(AssociationArgs):
    k: int = 1
    """x is the start checkpoint's pass@k."""


@dataclass(frozen=True, kw_only=True)
class CollapseAssociationArgs(AssociationArgs):
    dynamics: str
    """The dynamics evaluation of the intrinsic-reward runs (each pair's first model)."""
    window: int = 3
    """Steps in the trailing mean of the reward accuracy."""
    threshold: float = 0.01
    """A run has collapsed at the first step whose trailing mean is below it."""


def _association_detail(d: dict, a: dict) -> str:
    def num(v):
        return "-" if v is None else f"{v:.3g}"

    return (f"{d['units']} units (checkpoint x seed): r {d['r']:+.3f} [{d['r_interval'][0]:+.3f}, "
            f"{d['r_interval'][1]:+.3f}], rho {d['rho']:+.3f} [{d['rho_interval'][0]:+.3f}, "
            f"{d['rho_interval'][1]:+.3f}]"
            + (f", permutation p (over checkpoints) {d['permutation_p']:.3f}" if "permutation_p" in d else "")
            + (f"; {d['censored']} run(s) never collapsed (counted at their "
                                               "last step + 1)" if d.get("censored") else "")
            + "; " + ", ".join(f"{u}: " + ", ".join(f"{k} {num(v)}" for k, v in p.items())
                               for u, p in d["points"].items()))


def _which(a: dict) -> str:
    return "Spearman" if a["stat"] == "rho" else "Pearson"


RESAMPLED = "checkpoints resampled for the correlations"
register(
    Measure("gain_association", gain_association, GainArgs,
            lambda a: f"{_which(a)} corr(start's pass@{a['k']}, RL's gain in pass@{a['gain_k']}) across checkpoints "
                      "x seeds", RESAMPLED, _association_detail, too_few_clusters, models=()),
    Measure("collapse_association", collapse_association, CollapseAssociationArgs,
            lambda a: f"{_which(a)} corr(collapse step of the intrinsic run, supervised RL's gain in "
                      f"pass@{a['gain_k']}) across checkpoints x seeds", RESAMPLED, _association_detail,
            too_few_clusters, models=()),
)
