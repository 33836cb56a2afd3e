"""Measures over training dynamics (``kind: dynamics`` cells, :mod:`rlvr.experiments.dynamics_eval`):
does the token-level taxonomy predict the entropy change, and which cell drives a collapse
(docs/methods/losses.md, "The entropy-dynamics view"). One estimate per seed, with a 95% percentile
moving-block bootstrap interval over training steps (consecutive steps are autocorrelated: blocks of
round(N^(1/3)) steps, :func:`rlvr.experiments.weight_measures.block_length`).

- ``entropy_prediction`` (eval, model): Pearson correlation over steps t of the predicted change of
  the update made at step t-1 (``dH_total[t-1]``: its first-order entropy change, summed over the
  batch's tokens) with the observed change of the sampled-token entropy from step t-1 to step t
  (``entropy_obs_change[t]``). > 0: the taxonomy predicts the direction of the change.
- ``driving_cell`` (eval, model, cell, direction): with ``direction: decrease``, sum_t dH_cell[t] -
  min over the other three cells of sum_t dH_other[t]; < 0: ``cell`` contributes the largest
  predicted entropy decrease of the four (it drives a collapse). With ``direction: increase``,
  sum_t dH_cell[t] - max over the others; > 0: it contributes the largest increase (an explosion).
  With ``versus`` (another cell), sum_t dH_cell[t] - sum_t dH_versus[t]: one contrast of two candidate
  cells, where a pair of claims "cell X drives it" / "cell Y drives it" would read one number mirrored
  (one of them always holds).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from rlvr.algo.diagnostics import CELLS
from rlvr.analysis.association import pearson
from rlvr.config import check
from rlvr.errors import UserError
from rlvr.experiments.registry import Measure, ModelArgs, one_of, register
from rlvr.experiments.verdict import Estimate, seed_label
from rlvr.experiments.weight_measures import block_length, bootstrap_stat


def _series(stats: dict) -> dict:
    if stats.get("kind") != "dynamics":
        raise UserError("dynamics measures need a `kind: dynamics` evaluation")
    return stats["series"]



def lagged_pairs(series: dict) -> tuple[np.ndarray, np.ndarray]:
    """(predicted (N,), observed (N,)): dH_total of step t-1 against entropy_obs_change of step t,
    over the consecutive steps where both are logged."""
    steps, pred, obs = series["step"], series["dH_total"], series["entropy_obs_change"]
    xs, ys = [], []
    for i in range(1, len(steps)):
        if steps[i] == steps[i - 1] + 1 and pred[i - 1] is not None and obs[i] is not None:
            xs.append(pred[i - 1])
            ys.append(obs[i])
    return np.asarray(xs, dtype=np.float64), np.asarray(ys, dtype=np.float64)


def entropy_prediction(get, args: dict, seeds, against_seeds):
    out, details, pooled = [], {}, ([], [])
    for s in seeds:
        x, y = lagged_pairs(_series(get(args["eval"], args["model"], s)))
        out.append(Estimate(s, pearson(x, y), *bootstrap_stat(lambda i, x=x, y=y: pearson(x[i], y[i]), x.size,
                                                               block=block_length(x.size))))
        sign = float(np.mean(np.sign(x) == np.sign(y))) if x.size else math.nan
        details[seed_label(s)] = {"steps": int(x.size), "sign_agreement": sign}
        pooled[0].append(x)
        pooled[1].append(y)
    if pooled[0]:
        details["pooled_r"] = pearson(np.concatenate(pooled[0]), np.concatenate(pooled[1]))
    return out, details


def cell_sums(series: dict) -> np.ndarray:
    """(N, 4) predicted dH of each cell (CELLS order) per logged step."""
    rows = [[series[f"dH_{c}"][i] for c in CELLS] for i in range(len(series["step"]))]
    return np.array([r for r in rows if None not in r], dtype=np.float64).reshape(-1, len(CELLS))


def driving_cell(get, args: dict, seeds, against_seeds):
    direction = args["direction"]
    j = CELLS.index(args["cell"])
    others = [i for i in range(len(CELLS)) if i != j]

    def stat(d: np.ndarray):
        if args["versus"]:
            v = CELLS.index(args["versus"])
            return lambda idx: d[idx, j].sum() - d[idx, v].sum()
        if direction == "increase":
            return lambda idx: d[idx, j].sum() - d[idx][:, others].sum(0).max()
        return lambda idx: d[idx, j].sum() - d[idx][:, others].sum(0).min()

    out, details = [], {}
    for s in seeds:
        series = _series(get(args["eval"], args["model"], s))
        d = cell_sums(series)
        out.append(Estimate(s, float(stat(d)(np.arange(len(d)))) if len(d) else math.nan,
                            *bootstrap_stat(stat(d), len(d), block=block_length(len(d)))))
        ent = [e for e in series["entropy"] if e is not None]
        details[seed_label(s)] = {"sum_dH": {c: float(v) for c, v in zip(CELLS, d.sum(0))},
                              "entropy_start": float(np.mean(ent[:10])) if ent else None,
                              "entropy_end": float(np.mean(ent[-10:])) if ent else None,
                              "largest_decrease": CELLS[int(np.argmin(d.sum(0)))] if len(d) else None,
                              "largest_increase": CELLS[int(np.argmax(d.sum(0)))] if len(d) else None}
    return out, details


INTERVAL = "moving-block bootstrap over training steps for the dynamics measures"
DIRECTIONS = ("decrease", "increase")


@dataclass(frozen=True, kw_only=True)
class CellArgs(ModelArgs):
    cell: str
    """One of the four entropy-dynamics cells (pos_peak, pos_valley, neg_peak, neg_valley)."""
    direction: str = "decrease"
    """decrease: does the cell give the largest predicted decrease; increase: the largest increase."""
    versus: str = ""
    """Another cell: the estimate is the difference of the two cells' sums (direction unused)."""

    def __post_init__(self):
        one_of(self.cell, CELLS, "cell")
        one_of(self.direction, DIRECTIONS, "direction")
        check(self.versus != self.cell, "versus", "a cell against itself")
        if self.versus:
            one_of(self.versus, CELLS, "versus")


def _prediction_detail(d: dict, a: dict) -> str:
    pooled = d.get("pooled_r")
    return ("; ".join(f"{s}: {x['steps']} steps, signs agree {x['sign_agreement']:.2f}" for s, x in d.items()
                      if s != "pooled_r") + f"; pooled over seeds r = {'-' if pooled is None else f'{pooled:.3f}'}")


def _cell_detail(d: dict, a: dict) -> str:
    def num(v):
        return "-" if v is None else f"{v:.3f}"

    return "; ".join(f"{s}: entropy {num(x['entropy_start'])} -> {num(x['entropy_end'])}, "
                     "sum dH " + ", ".join(f"{c} {v:+.2e}" for c, v in x["sum_dH"].items())
                     + f", largest decrease {x['largest_decrease']}, largest increase {x['largest_increase']}"
                     for s, x in d.items())


register(
    Measure("entropy_prediction", entropy_prediction, ModelArgs,
            lambda a: f"corr(predicted dH of step t-1, observed entropy change at t), {a['model']}", INTERVAL,
            _prediction_detail, section="Training dynamics"),
    Measure("driving_cell", driving_cell, CellArgs,
            lambda a: (f"sum dH_{a['cell']} - sum dH_{a['versus']}" if a["versus"] else
                       f"sum dH_{a['cell']} - the {'highest' if a['direction'] == 'increase' else 'lowest'} other "
                       "cell's sum") + f", {a['model']}", INTERVAL, _cell_detail, section="Training dynamics"),
)
