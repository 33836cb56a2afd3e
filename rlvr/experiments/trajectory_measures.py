"""Measures over a whole training trajectory of a logged series (a ``kind: dynamics`` cell), for
stability read through training rather than at the end (issue 52: WAPO against GRPO).

- ``series_change`` (eval, model, series, window = 10, relative = false): per seed, the mean of the
  series' last ``window`` logged points minus the mean of its first ``window`` (``relative``: divided
  by that start mean, e.g. -0.5 = it halved). Interval: +-1.96 sd with sd^2 = 2 j^2 / window, j =
  sd(step-to-step differences) / sqrt 2, the jitter of one point around its trend (a smooth trend
  adds little to the differences; a series that only drifts gives a narrow interval).
- ``trajectory_gap`` (eval, model, against, series, stability = false): per seed, over the steps both
  runs logged (paired by step number, seed by seed), d(t) = x_model(t) - x_against(t) (e.g. held-out
  accuracy through training), or with ``stability`` d(t) = |x_model(t) - x_model(t0)| -
  |x_against(t) - x_against(t0)|, t0 their first common step (< 0: the model's series stays closer to
  where it started than against's does, whichever way against's moves). The estimate is mean_t d(t)
  (t > t0 with ``stability``), the area between the two trajectories per step; interval: moving-block
  bootstrap over the paired steps (:func:`rlvr.experiments.weight_measures.block_length`). Not
  identifiable with fewer than :data:`FEWEST_STEPS` paired steps in a seed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from rlvr.errors import UserError
from rlvr.experiments.registry import Measure, ModelArgs, PairArgs, register
from rlvr.experiments.verdict import Estimate, seed_label
from rlvr.experiments.weight_measures import block_length, bootstrap_stat

FEWEST_STEPS = 5
"""Fewest paired steps per seed for a trajectory gap (fewer moving blocks say nothing of its spread)."""


def logged(stats: dict, key: str) -> dict[int, float]:
    """{step: value} of a dynamics cell's series ``key``, the steps that logged it."""
    series = stats.get("series") if stats.get("kind") == "dynamics" else None
    if series is None:
        raise UserError("a trajectory measure needs a `kind: dynamics` evaluation (the run's logged series)")
    if key not in series:
        raise UserError(f"the runs' cells have no series {key!r} (logged by train.entropy_probe for the probe's)")
    return {int(s): float(v) for s, v in zip(series["step"], series[key]) if v is not None}


def series_change(get, args: dict, seeds, against_seeds):
    w = int(args["window"])
    out, details = [], {}
    for s in seeds:
        points = logged(get(args["eval"], args["model"], s), args["series"])
        x = np.asarray([points[k] for k in sorted(points)])
        if x.size < 2 * w:
            raise UserError(f"{args['model']} logged {x.size} points of {args['series']}; need {2 * w}")
        start, end = float(x[:w].mean()), float(x[-w:].mean())
        jitter = float(np.std(np.diff(x), ddof=1)) / math.sqrt(2)
        value, sd = end - start, math.sqrt(2 * jitter ** 2 / w)
        if args["relative"]:
            value, sd = value / start, sd / abs(start)
        out.append(Estimate(s, value, value - 1.96 * sd, value + 1.96 * sd))
        details[seed_label(s)] = {"start": start, "end": end, "points": int(x.size), "jitter": jitter}
    return out, details


def trajectory_gap(get, args: dict, seeds, against_seeds):
    out, details = [], {}
    for s, a in zip(seeds, against_seeds if against_seeds != [None] else [None] * len(seeds)):
        mine = logged(get(args["eval"], args["model"], s), args["series"])
        theirs = logged(get(args["eval"], args["against"], a), args["series"])
        steps = sorted(set(mine) & set(theirs))
        xm, xa = np.asarray([mine[t] for t in steps]), np.asarray([theirs[t] for t in steps])
        if args["stability"] and steps:
            d = (np.abs(xm - xm[0]) - np.abs(xa - xa[0]))[1:]
        else:
            d = xm - xa
        value = float(d.mean()) if d.size else math.nan
        lo, hi = bootstrap_stat(lambda idx, d=d: float(d[idx].mean()), d.size, block=block_length(d.size))
        out.append(Estimate(s, value, lo, hi))
        details[seed_label(s)] = {"steps": int(d.size), "model_start": float(xm[0]) if steps else None,
                                  "model_end": float(xm[-1]) if steps else None,
                                  "against_start": float(xa[0]) if steps else None,
                                  "against_end": float(xa[-1]) if steps else None}
    return out, details


def too_few_paired_steps(args: dict, estimates, details: dict) -> str:
    few = [f"{s} ({x['steps']})" for s, x in details.items() if x["steps"] < FEWEST_STEPS]
    return f"fewer than {FEWEST_STEPS} paired steps: {', '.join(few)}" if few else ""


@dataclass(frozen=True, kw_only=True)
class ChangeArgs(ModelArgs):
    series: str
    """The logged series (e.g. probe_entropy_after, entropy, heldout_pass_rate)."""
    window: int = 10
    """Points in the start mean and in the end mean."""
    relative: bool = False
    """Divide the change by the start mean."""


@dataclass(frozen=True, kw_only=True)
class GapArgs(PairArgs):
    series: str
    """The logged series both runs are compared on."""
    stability: bool = False
    """Compare each run's distance from its own start instead of the two series themselves."""


def _change_detail(d: dict, a: dict) -> str:
    return "; ".join(f"{s}: {a['series']} {x['start']:.4g} -> {x['end']:.4g} (means of {a['window']} of "
                     f"{x['points']} points; one point's jitter {x['jitter']:.2g})" for s, x in d.items())


def _gap_detail(d: dict, a: dict) -> str:
    def num(v):
        return "-" if v is None else f"{v:.4g}"

    return "; ".join(f"{s}: {x['steps']} paired steps, {a['model']} {num(x['model_start'])} -> {num(x['model_end'])}, "
                     f"{a['against']} {num(x['against_start'])} -> {num(x['against_end'])}" for s, x in d.items())


JITTER = "+-1.96 sd from each series' step-to-step jitter for series_change; moving-block bootstrap over paired " \
         "steps for trajectory_gap"
register(
    Measure("series_change", series_change, ChangeArgs,
            lambda a: (f"{a['model']}'s {a['series']}: mean of the last {a['window']} points - the first "
                       f"{a['window']}" + (", over the first" if a["relative"] else "")), JITTER, _change_detail,
            section="Training dynamics"),
    Measure("trajectory_gap", trajectory_gap, GapArgs,
            lambda a: (f"mean over training of abs({a['series']} - its start) {a['model']} - {a['against']}"
                       if a["stability"] else f"mean over training of {a['series']} {a['model']} - {a['against']}"),
            JITTER, _gap_detail, too_few_paired_steps, "Training dynamics"),
)
