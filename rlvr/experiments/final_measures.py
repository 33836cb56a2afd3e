"""Measures of where runs end and how their early parts foretell it, over ``kind: dynamics`` cells
(the runs' held-out pass rate against compute): the claims ScaleRL's curves can answer without a
ceiling (docs/methods/scaling_curves.md, section "Extrapolation against other forms").

- ``final_diff`` (eval, model, against, window = 3): per seed (the two runs paired by RL seed), the
  mean of ``model``'s last ``window`` evaluations minus ``against``'s. Interval: +-1.96 sd, the sd of
  each mean from its run's evaluation jitter (:func:`rlvr.experiments.curve_measures.jitter`, the
  step-to-step noise of one evaluation: 3-5 points on the tiny testbed, above the sampling sd) over
  sqrt(window). Not identifiable (:func:`unequal_compute`) unless both runs end at the same compute
  (within 1%): finals at equal compute.
- ``form_extrapolation`` (eval, model, arms, form: power_law | log_linear, fraction = 0.5): per seed,
  the mean over the runs ``[model, *arms]`` of [error of ``form`` - error of the sigmoid], each
  error the mean absolute error of the form fitted on the first ``fraction`` of compute at every
  later evaluation (:func:`rlvr.analysis.extrapolation.extrapolation_error`); > 0: the sigmoid
  extrapolates better. Interval: percentile bootstrap over the runs (2,000 draws).
- ``early_rank_gain`` (eval, model, arms, fraction = 0.25, window = 3): per seed, Spearman's
  correlation of the sigmoid fits' predicted finals (fitted on the first ``fraction``) with the
  observed finals (mean of the last ``window``) over the runs ``[model, *arms]``, minus that of the
  naive ranking (each run's mean over the same first ``fraction``, from its second point); > 0: the
  fits rank the ends better than the early means do. Interval: percentile bootstrap over the runs,
  the two rankings paired.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from rlvr.analysis.extrapolation import early_fit_final, early_mean, extrapolation_error, final_mean, spearman
from rlvr.experiments.curve_measures import CompareArgs, CurveArgs, curve, jitter
from rlvr.experiments.registry import Measure, one_of, register
from rlvr.experiments.verdict import Estimate, seed_label

N_DRAWS = 2000
COMPUTE_TOLERANCE = 0.01
"""Two runs end at equal compute when their last compute differs by at most this share."""
ALTERNATIVES = ("power_law", "log_linear")


def final_diff(get, args: dict, seeds, against_seeds):
    w, x = int(args["window"]), args["x"]
    out, details = [], {}
    for s, a in zip(seeds, against_seeds if against_seeds != [None] else [None] * len(seeds)):
        (Cm, Rm), (Ca, Ra) = (curve(get(args["eval"], name, seed), x)
                              for name, seed in ((args["model"], s), (args["against"], a)))
        fm, fa = final_mean(Rm, w), final_mean(Ra, w)
        sd = math.sqrt((jitter(Rm) ** 2 + jitter(Ra) ** 2) / w)
        v = fm - fa
        out.append(Estimate(s, v, v - 1.96 * sd, v + 1.96 * sd))
        details[seed_label(s)] = {"model": fm, "against": fa, "sd": sd, "model_end": float(Cm[-1]),
                                  "against_end": float(Ca[-1])}
    return out, details


def unequal_compute(args: dict, estimates, details: dict) -> str:
    """Why a final difference is not at equal compute ('' when every pair ends within
    :data:`COMPUTE_TOLERANCE` of each other)."""
    off = [f"{s} ({x['model_end']:.4g} vs {x['against_end']:.4g})" for s, x in details.items()
           if abs(x["model_end"] - x["against_end"]) > COMPUTE_TOLERANCE * max(x["model_end"], x["against_end"])]
    if not off:
        return ""
    return f"{args['model']} and {args['against']} end at different compute ({args['x']}) in {', '.join(off)}"


def _curves(get, args: dict, seed) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{run: (C (N,), R (N,))} of ``[model, *arms]`` at ``seed``."""
    return {name: curve(get(args["eval"], name, seed), args["x"]) for name in (args["model"], *args["arms"])}


def _bootstrap(values_K: np.ndarray, statistic, seed: int) -> tuple[float, float]:
    """Percentile 95% interval of ``statistic`` (rows (k, ...) -> float) over :data:`N_DRAWS` resamples of
    the K rows of ``values_K`` with replacement; NaN draws (e.g. a constant ranking) are left out."""
    rng = np.random.default_rng(seed)
    k = values_K.shape[0]
    draws = np.array([statistic(values_K[rng.integers(0, k, k)]) for _ in range(N_DRAWS)])
    draws = draws[np.isfinite(draws)]
    if not draws.size:
        return math.nan, math.nan
    lo, hi = np.percentile(draws, [2.5, 97.5])
    return float(lo), float(hi)


def form_extrapolation(get, args: dict, seeds, against_seeds):
    frac, form = float(args["fraction"]), args["form"]
    out, details = [], {}
    for s in seeds:
        curves = _curves(get, args, s)
        errors_K2 = np.array([[extrapolation_error(form, C, R, frac), extrapolation_error("sigmoid", C, R, frac)]
                              for C, R in curves.values()])
        gap_K = errors_K2[:, 0] - errors_K2[:, 1]
        lo, hi = _bootstrap(gap_K, np.mean, 0 if s is None else s)
        out.append(Estimate(s, float(gap_K.mean()), lo, hi))
        details[seed_label(s)] = {"runs": len(curves), "form_error": float(errors_K2[:, 0].mean()),
                                  "sigmoid_error": float(errors_K2[:, 1].mean()),
                                  "sigmoid_better": int((gap_K > 0).sum())}
    return out, details


def rank_gain(rows_K3: np.ndarray) -> float:
    """Spearman(fit's predicted finals, finals) - Spearman(early means, finals); rows_K3: (K, 3) of
    [early-fit prediction, early mean, final] per run."""
    return spearman(rows_K3[:, 0], rows_K3[:, 2]) - spearman(rows_K3[:, 1], rows_K3[:, 2])


def early_rank_gain(get, args: dict, seeds, against_seeds):
    frac, w = float(args["fraction"]), int(args["window"])
    out, details = [], {}
    for s in seeds:
        curves = _curves(get, args, s)
        rows_K3 = np.array([[early_fit_final(C, R, frac), early_mean(C, R, frac), final_mean(R, w)]
                            for C, R in curves.values()])
        lo, hi = _bootstrap(rows_K3, rank_gain, 0 if s is None else s)
        out.append(Estimate(s, rank_gain(rows_K3), lo, hi))
        details[seed_label(s)] = {"runs": len(curves), "fit_spearman": spearman(rows_K3[:, 0], rows_K3[:, 2]),
                                  "naive_spearman": spearman(rows_K3[:, 1], rows_K3[:, 2])}
    return out, details


SECTION = "Curves"


@dataclass(frozen=True, kw_only=True)
class FinalArgs(CompareArgs):
    window: int = 3
    """Evaluations averaged at each run's end."""


@dataclass(frozen=True, kw_only=True)
class FormArgs(CurveArgs):
    arms: tuple[str, ...]
    """The other runs compared with ``model``."""
    form: str
    """The unbounded form the sigmoid is compared with: power_law | log_linear."""
    fraction: float = 0.5
    """The share of compute each fit sees; it predicts every later evaluation."""

    def __post_init__(self):
        super().__post_init__()
        one_of(self.form, ALTERNATIVES, "form")


@dataclass(frozen=True, kw_only=True)
class RankArgs(CurveArgs):
    arms: tuple[str, ...]
    """The other runs ranked with ``model``."""
    fraction: float = 0.25
    """The share of compute the fits and the early means see."""
    window: int = 3
    """Evaluations averaged at each run's end (the observed final)."""


def _final_detail(d: dict, a: dict) -> str:
    return "; ".join(f"{s}: {a['model']} {x['model']:.3f} vs {a['against']} {x['against']:.3f} "
                     f"({100 * (x['model'] - x['against']):+.1f} pts, sd {100 * x['sd']:.1f})" for s, x in d.items())


def _form_detail(d: dict, a: dict) -> str:
    return "; ".join(f"{s}: mean absolute error {a['form']} {100 * x['form_error']:.1f} pts, sigmoid "
                     f"{100 * x['sigmoid_error']:.1f} pts; the sigmoid closer in {x['sigmoid_better']} of "
                     f"{x['runs']} runs"
                     for s, x in d.items())


def _rank_detail(d: dict, a: dict) -> str:
    return "; ".join(f"{s}: Spearman over {x['runs']} runs, early fits {x['fit_spearman']:.3f}, early means "
                     f"{x['naive_spearman']:.3f}" for s, x in d.items())


register(
    Measure("final_diff", final_diff, FinalArgs,
            lambda a: f"mean of the last {a['window']} evaluations, {a['model']} - {a['against']} (paired by seed)",
            "+-1.96 sd of the final means from each run's evaluation jitter", _final_detail, unequal_compute, SECTION),
    Measure("form_extrapolation", form_extrapolation, FormArgs,
            lambda a: f"mean absolute extrapolation error, {a['form']} - sigmoid, fits on the first "
                      f"{a['fraction']:.0%} of compute, over {a['model']} and {len(a['arms'])} arms",
            "percentile bootstrap over the runs for the extrapolation and ranking measures", _form_detail,
            section=SECTION),
    Measure("early_rank_gain", early_rank_gain, RankArgs,
            lambda a: f"Spearman of the early fits' predicted finals - Spearman of the early means (first "
                      f"{a['fraction']:.0%} of compute) with the finals, over {a['model']} and {len(a['arms'])} arms",
            "percentile bootstrap over the runs for the extrapolation and ranking measures", _rank_detail,
            section=SECTION),
)
