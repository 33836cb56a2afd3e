"""Checks of ScaleRL's claims on measured curves: does an early fit predict the end, what moves A
(the ceiling) and what moves B (the efficiency), and does an early fit rank crossing curves right.

Pure functions over arrays (one curve = compute C (N,) and held-out pass rate R (N,), increasing C);
the fitting itself is :mod:`rlvr.analysis.curves`. Formulas: docs/methods/scaling_curves.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rlvr.analysis.curves import CurveBootstrap, CurveFit, bootstrap_fit, fit_sigmoid, judge_interval, predict
from rlvr.errors import UserError

Curve = tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True)
class Prediction:
    """A fit on the points with C <= ``fraction`` x the run's last compute, extrapolated to the end."""

    fraction: float
    n_points: int
    fit: CurveFit
    predicted: float  # the fitted curve at the last compute
    low: float  # its prediction interval (bootstrap curves + residual noise)
    high: float
    observed: float  # the measured pass rate at the last compute
    error: float  # predicted - observed
    covered: bool  # observed inside [low, high]
    boot: CurveBootstrap = field(compare=False, repr=False)  # the early fit's bootstrap replicates


def predict_end(C, R, fraction: float, *, R0: float | None = None, n_boot: int = 200, seed: int = 0,
                level: float = 0.95) -> Prediction:
    """Fit on the first ``fraction`` of a run's compute (R0 fixed to ``R0``, default the first measured
    pass rate) and predict the pass rate at its last compute. C, R: (N,)."""
    C, R = np.asarray(C, dtype=float), np.asarray(R, dtype=float)
    if not 0 < fraction <= 1:
        raise UserError(f"fraction {fraction} must lie in (0, 1]")
    r0 = float(R[0]) if R0 is None else R0
    early = C <= fraction * C[-1]
    fit = fit_sigmoid(C[early], R[early], R0=r0)
    boot = bootstrap_fit(C[early], R[early], n_boot=n_boot, seed=seed, R0=r0, r0_sd=fit.rmse, level=level)
    fit = judge_interval(fit, boot, float(C[early].max()))
    value, low, high = predict(fit, float(C[-1]), boot)
    observed = float(R[-1])
    return Prediction(fraction, int(early.sum()), fit, value, low, high, observed, value - observed,
                      bool(low <= observed <= high), boot)


def fit_with_replicates(C, R, *, R0: float | None = None, n_boot: int = 200,
                        seed: int = 0) -> tuple[CurveFit, CurveBootstrap]:
    """The whole curve's fit (R0 fixed to the first point unless given) and its case bootstrap."""
    C, R = np.asarray(C, dtype=float), np.asarray(R, dtype=float)
    r0 = float(R[0]) if R0 is None else R0
    fit = fit_sigmoid(C, R, R0=r0)
    boot = bootstrap_fit(C, R, n_boot=n_boot, seed=seed, R0=r0, r0_sd=fit.rmse)
    return judge_interval(fit, boot, float(C.max())), boot


@dataclass(frozen=True)
class ParamDiff:
    """Mean over seeds of arm a's parameter minus arm b's, with a percentile interval."""

    param: str
    diff: float
    low: float
    high: float
    a: float  # mean over arm a's seeds
    b: float


def param_diff(boots_a: list[tuple[CurveFit, CurveBootstrap]], boots_b: list[tuple[CurveFit, CurveBootstrap]],
               param: str, *, n: int = 2000, seed: int = 0, level: float = 0.95, log: bool = False) -> ParamDiff:
    """Difference in ``param`` ("A", "B" or "C_mid") between two arms of seeded runs.

    Each draw resamples each arm's seeds with replacement and takes, per drawn seed, one random
    bootstrap replicate of its fit, then differences the arms' means: the interval carries both
    the seed-to-seed spread and each fit's own uncertainty. ``log``: compare ln(param) (for B and
    C_mid, whose effects are ratios)."""
    if not boots_a or not boots_b:
        raise UserError("both arms need at least one fitted run")
    f = np.log if log else (lambda v: v)
    rng = np.random.default_rng(seed)

    def draws(boots):
        reps = [f(np.asarray(getattr(b, param), dtype=float)) for _, b in boots]
        out = np.empty(n)
        for i in range(n):
            picks = rng.integers(0, len(reps), len(reps))
            out[i] = np.mean([reps[k][rng.integers(0, reps[k].size)] for k in picks])
        return out

    d = draws(boots_a) - draws(boots_b)
    q = [(1 - level) / 2 * 100, (1 + level) / 2 * 100]
    lo, hi = (float(v) for v in np.percentile(d, q))
    a = float(np.mean([f(getattr(fit, param)) for fit, _ in boots_a]))
    b = float(np.mean([f(getattr(fit, param)) for fit, _ in boots_b]))
    return ParamDiff(param, a - b, lo, hi, a, b)


@dataclass(frozen=True)
class Crossing:
    """Two settings' curves: who leads early, who ends higher, and whom an early fit picks."""

    early_leader: str  # "a" or "b": higher measured pass rate at the early compute
    final_leader: str  # higher measured pass rate at the end
    predicted_leader: str  # higher predicted final pass rate from the fits on the early part
    crossed: bool  # early_leader != final_leader
    ranked_right: bool  # predicted_leader == final_leader


def crossing(a: Curve, b: Curve, fraction: float, *, n_last: int = 3) -> Crossing:
    """Compare two curves on a common compute axis. Early: the mean of each curve's points with
    C <= ``fraction`` x the shorter run's last compute, from the second point on (the first is R0);
    final: the mean of each curve's last ``n_last`` points (evaluation noise); the early fits
    (R0 fixed to each first point) predict each curve at the shorter run's last compute."""
    (Ca, Ra), (Cb, Rb) = ((np.asarray(C, float), np.asarray(R, float)) for C, R in (a, b))
    c_end = min(Ca[-1], Cb[-1])
    cut = fraction * c_end

    def early_mean(C, R):
        m = (C <= cut) & (np.arange(C.size) > 0)
        if not m.any():
            raise UserError(f"no point before compute {cut:.3g}; raise the fraction")
        return float(R[m].mean())

    def pred(C, R):
        m = C <= cut
        return float(predict(fit_sigmoid(C[m], R[m], R0=float(R[0])), c_end)[0])

    lead = (lambda x, y: "a" if x > y else "b")
    early = lead(early_mean(Ca, Ra), early_mean(Cb, Rb))
    final = lead(float(Ra[Ca <= c_end][-n_last:].mean()), float(Rb[Cb <= c_end][-n_last:].mean()))
    predicted = lead(pred(Ca, Ra), pred(Cb, Rb))
    return Crossing(early, final, predicted, early != final, predicted == final)
