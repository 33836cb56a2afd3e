"""Measures over many intrinsic-reward runs at once, for the unsupervised-RLVR questions "is the
collapse step set by the prior or by engineering choices?" and "does the base's agreement of
confidence with correctness predict what the intrinsic reward does?" (docs/methods/unsupervised_rlvr.md).

- ``collapse_variance`` (eval, grid, window, threshold, relative, units_per_step): a two-way design,
  ``grid`` rows = prior levels (pretraining checkpoints), columns = engineering levels (learning rate,
  batch), one run per cell. Per seed, Y (R, C) the runs' collapse steps
  (:func:`rlvr.experiments.association_measures.collapse_with_draws`), grand mean m, and the main
  effects' sums of squares SS_prior = C sum_i (Ybar_i. - m)^2, SS_eng = R sum_j (Ybar_.j - m)^2,
  SS_total = sum_ij (Y_ij - m)^2; the estimate is (SS_prior - SS_eng) / SS_total in [-1, 1] (> 0: the
  checkpoint explains more of the collapse step's variance than the engineering does). With R = C both
  main effects have the same degrees of freedom, so neither share is favoured by its count of levels.
  Interval: percentiles over the parametric bootstrap of every run's reward accuracy (the same draws
  for every cell of the grid, recomputed whole). Not identifiable when a run starts at 0 reward
  accuracy under a relative threshold, or when no run of a seed collapsed (SS_total = 0).
- ``auroc_association`` (eval, runs, outcome, start_steps = 5, window, threshold, relative, stat,
  cluster): across runs x seeds, x = the run's start AUROC of its reward for correctness (the mean of
  ``proxy_truth_auroc`` over its first ``start_steps`` logged steps: step 1's batch is the base's own
  samples), y = ``rise`` (the smoothed held-out peak after the first point minus the first point, as
  ``rise_and_fall`` reads it) or ``collapse`` (the collapse step). Pearson's r (``stat: rho``:
  Spearman's) with a bootstrap that resamples whole runs (each run is one reward at one checkpoint; its
  seeds share them). Not identifiable with fewer runs than a 95% percentile interval needs (5).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rlvr.config import check
from rlvr.errors import UserError
from rlvr.experiments.association_measures import (
    ALPHA,
    STATS,
    association_estimate,
    collapse_with_draws,
    distinct_resamples,
)
from rlvr.experiments.registry import Args, Measure, one_of, register
from rlvr.experiments.series_measures import heldout, trailing_smooth
from rlvr.experiments.verdict import Estimate, seed_label


def variance_share(steps_R_C: np.ndarray) -> float:
    """(SS_prior - SS_eng) / SS_total of a two-way table of collapse steps (rows: prior levels,
    columns: engineering levels), main effects only; nan when every cell is equal."""
    y = np.asarray(steps_R_C, dtype=np.float64)
    rows, cols = y.shape
    grand = y.mean()
    total = float(((y - grand) ** 2).sum())
    if total <= 0:
        return float("nan")
    prior = cols * float(((y.mean(axis=1) - grand) ** 2).sum())
    eng = rows * float(((y.mean(axis=0) - grand) ** 2).sum())
    return (prior - eng) / total


def collapse_variance(get, args: dict, seeds, against_seeds):
    grid = args["grid"]
    w, thr, rel, units = int(args["window"]), float(args["threshold"]), float(args["relative"]), \
        int(args["units_per_step"])
    out, details = [], {}
    for s in seeds:
        runs = [[collapse_with_draws(get(args["eval"], name, s), w, thr, rel, units) for name in row] for row in grid]
        steps = np.array([[c.step for c in row] for row in runs])
        value = variance_share(steps)
        lo = hi = value
        if units:
            draws = np.stack([np.stack([c.draws for c in row]) for row in runs], axis=-1)  # (R, C, D)
            shares = np.array([variance_share(draws[:, :, d]) for d in range(draws.shape[-1])])
            shares = shares[np.isfinite(shares)]
            if shares.size:
                lo, hi = (float(q) for q in np.quantile(shares, [0.025, 0.975]))
        out.append(Estimate(s, value, lo, hi))
        details[seed_label(s)] = {
            "steps": steps.tolist(), "censored": int(sum(not c.collapsed for row in runs for c in row)),
            "starts": [[round(c.start, 4) for c in row] for row in runs],
            "flat_starts": [name for row, names in zip(runs, grid) for c, name in zip(row, names)
                            if rel and c.start <= 0]}
    return out, details


def no_variance_or_flat_start(args: dict, estimates, details: dict) -> str:
    """Why a variance share is not identifiable here ('' when it is)."""
    flat = [f"{name}-{s}" for s, x in details.items() for name in x["flat_starts"]]
    if flat:
        return f"{', '.join(flat)} started at 0 reward accuracy: a relative threshold has nothing to lose"
    still = [s for s, x in details.items() if np.ptp(np.asarray(x["steps"])) == 0]
    if still:
        return f"{', '.join(still)}: every run has the same collapse step (none collapsed), so there is no variance"
    return ""


def start_auroc(stats: dict, start_steps: int) -> float | None:
    """Mean ``proxy_truth_auroc`` over a dynamics cell's first ``start_steps`` logged steps (None
    where none logged one: no group had both a correct and a wrong completion)."""
    series = stats.get("series") if stats.get("kind") == "dynamics" else None
    if series is None:
        raise UserError("auroc_association needs a `kind: dynamics` evaluation of the intrinsic-reward runs")
    values = [v for v in (series.get("proxy_truth_auroc") or [])[:start_steps] if v is not None]
    return float(np.mean(values)) if values else None


def rise_of(stats: dict, window: int) -> float:
    """The smoothed held-out peak after the first point minus the first point (``rise_and_fall``'s rise)."""
    _, r = heldout(stats)
    sm = trailing_smooth(r, window)
    return float(sm[1:].max() - r[0])


def auroc_association(get, args: dict, seeds, against_seeds):
    x, y, groups, points, undefined = [], [], [], {}, []
    for i, run in enumerate(args["runs"]):
        for s in seeds:
            stats = get(args["eval"], run, s)
            auroc = start_auroc(stats, int(args["start_steps"]))
            if auroc is None:
                undefined.append(f"{run} {seed_label(s)}")
                continue
            if args["outcome"] == "rise":
                outcome = rise_of(stats, int(args["window"]))
            else:
                outcome = collapse_with_draws(stats, int(args["window"]), float(args["threshold"]),
                                              float(args["relative"])).step
            x.append(auroc)
            y.append(outcome)
            groups.append(i)
            points[f"{run} {seed_label(s)}"] = {"auroc": auroc, args["outcome"]: outcome}
    if len(set(groups)) < 2:
        raise UserError(f"{len(set(groups))} run(s) with a start AUROC: an association needs at least two")
    est, details = association_estimate(args, x, y, groups)
    return est, {**details, "undefined": undefined, "points": points}


def too_few_runs(args: dict, estimates, details: dict) -> str:
    """Why an AUROC association's interval is not identified ('' when it is): resampling R runs
    gives at most C(2R - 1, R) distinct draws; a 2.5% tail needs 40."""
    units = len(args["runs"]) if args["cluster"] else int(details.get("units", 0))
    if distinct_resamples(units) >= round(2 / ALPHA):
        return ""
    return (f"{units} runs: the bootstrap over runs has at most {distinct_resamples(units)} distinct resamples, and a "
            "95% interval needs at least 40 (5 or more runs)")


@dataclass(frozen=True, kw_only=True)
class CollapseRule:
    """How a run's collapse step is read (:func:`rlvr.experiments.association_measures.collapse_with_draws`)."""

    window: int = 10
    """Steps in the trailing mean of the reward accuracy (and in the start's mean)."""
    threshold: float = 0.01
    """The absolute threshold (used when ``relative`` is 0)."""
    relative: float = 0.5
    """> 0: the threshold is this fraction of the run's start."""


@dataclass(frozen=True, kw_only=True)
class VarianceArgs(Args, CollapseRule):
    grid: tuple[tuple[str, ...], ...]
    """Rows: prior levels (checkpoints); columns: engineering levels; each entry one run (a model)."""
    units_per_step: int = 0
    """> 0: the interval's parametric bootstrap draws each step's reward accuracy over this many units."""

    def __post_init__(self):
        check(len(self.grid) >= 2 and len({len(r) for r in self.grid}) == 1 and len(self.grid[0]) >= 2, "grid",
              "a rectangular table of runs with at least 2 rows (prior levels) and 2 columns (engineering levels)")


OUTCOMES = ("rise", "collapse")


@dataclass(frozen=True, kw_only=True)
class AurocArgs(Args, CollapseRule):
    runs: tuple[str, ...]
    """The intrinsic-reward runs (each one reward from one checkpoint), resampled whole."""
    outcome: str = "rise"
    """rise: the held-out peak after the start minus the start; collapse: the collapse step."""
    start_steps: int = 5
    """The start AUROC is the mean over the run's first this many logged steps."""
    stat: str = "r"
    """r (Pearson) | rho (Spearman)."""
    cluster: bool = True
    """Resample whole runs (their seeds share the run's reward and checkpoint)."""

    def __post_init__(self):
        one_of(self.outcome, OUTCOMES, "outcome")
        one_of(self.stat, STATS, "stat")
        check(self.start_steps >= 1, "start_steps", "at least 1")


def _variance_detail(d: dict, a: dict) -> str:
    return "; ".join(f"{s}: collapse steps (rows: prior levels, columns: engineering) {x['steps']}, "
                     f"{x['censored']} never collapsed, starting reward accuracy {x['starts']}" for s, x in d.items())


def _auroc_detail(d: dict, a: dict) -> str:
    def num(v):
        return f"{v:.3g}"

    head = (f"{d['units']} units (run x seed): r {d['r']:+.3f} [{d['r_interval'][0]:+.3f}, {d['r_interval'][1]:+.3f}], "
            f"rho {d['rho']:+.3f} [{d['rho_interval'][0]:+.3f}, {d['rho_interval'][1]:+.3f}]")
    if d["undefined"]:
        head += f"; no start AUROC (no group with both a right and a wrong answer): {', '.join(d['undefined'])}"
    return head + "; " + ", ".join(f"{u}: " + ", ".join(f"{k} {num(v)}" for k, v in p.items())
                                   for u, p in d["points"].items())


BOOTSTRAP = "a parametric bootstrap of each step's reward accuracy for the collapse variance; runs resampled " \
            "for the AUROC associations"
register(
    Measure("collapse_variance", collapse_variance, VarianceArgs,
            lambda a: "(SS_prior - SS_engineering) / SS_total of the collapse step over a checkpoint x engineering "
                      "grid (main effects)", BOOTSTRAP, _variance_detail, no_variance_or_flat_start,
            "Training dynamics", models=()),
    Measure("auroc_association", auroc_association, AurocArgs,
            lambda a: f"{'Spearman' if a['stat'] == 'rho' else 'Pearson'} corr(the base's within-group AUROC of the "
                      "reward for correctness, the run's "
                      f"{'held-out rise' if a['outcome'] == 'rise' else 'collapse step'}) across runs x seeds",
            BOOTSTRAP, _auroc_detail, too_few_runs, "Training dynamics", models=()),
)
