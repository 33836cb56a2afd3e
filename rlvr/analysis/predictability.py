"""Checks of ScaleRL's claims on measured curves: does an early fit predict the end, what moves A
(the ceiling) and what moves B (the efficiency), and does an early fit rank crossing curves right.

Pure functions over arrays (one curve = compute C (N,) and held-out pass rate R (N,), increasing C);
the fitting itself is :mod:`rlvr.analysis.curves`. Formulas: docs/methods/scaling_curves.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rlvr.analysis.curves import CurveBootstrap, CurveFit, fit_sigmoid, fit_with_bootstrap, predict
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
    fit, boot = fit_with_bootstrap(C[early], R[early], R0=r0, n_boot=n_boot, seed=seed, level=level)
    value, low, high = predict(fit, float(C[-1]), boot)
    observed = float(R[-1])
    return Prediction(fraction, int(early.sum()), fit, value, low, high, observed, value - observed,
                      bool(low <= observed <= high), boot)


def fit_with_replicates(C, R, *, R0: float | None = None, n_boot: int = 200,
                        seed: int = 0) -> tuple[CurveFit, CurveBootstrap]:
    """The whole curve's fit (R0 fixed to the first point unless given) and its case bootstrap."""
    C, R = np.asarray(C, dtype=float), np.asarray(R, dtype=float)
    return fit_with_bootstrap(C, R, R0=float(R[0]) if R0 is None else R0, n_boot=n_boot, seed=seed)


@dataclass(frozen=True)
class ParamDiff:
    """Mean over seeds of arm a's parameter minus arm b's, with a percentile interval."""

    param: str
    diff: float
    low: float
    high: float
    a: float  # mean over arm a's seeds
    b: float


def arm_draws(boots: list[tuple[CurveFit, CurveBootstrap]], value, n: int, rng: np.random.Generator) -> np.ndarray:
    """(n,) draws of an arm's mean of ``value`` (a function of one replicate's A, B, C_mid, R0 arrays
    and its index -> float): each draw resamples the arm's seeds with replacement and takes, per
    drawn seed, one random bootstrap replicate of its fit (all parameters from that one replicate).
    The draws' values are collected (n, seeds) and averaged in one call: the same means, bit for bit,
    as a mean per draw, at a fraction of the cost."""
    picked = np.empty((n, len(boots)))
    for i in range(n):
        picks = rng.integers(0, len(boots), len(boots))
        picked[i] = [value(boots[k][1], int(rng.integers(0, boots[k][1].A.size))) for k in picks]
    return picked.mean(axis=1)


def _interval(d: np.ndarray, level: float) -> tuple[float, float]:
    lo, hi = np.percentile(d, [(1 - level) / 2 * 100, (1 + level) / 2 * 100])
    return float(lo), float(hi)


def param_diff(boots_a: list[tuple[CurveFit, CurveBootstrap]], boots_b: list[tuple[CurveFit, CurveBootstrap]],
               param: str, *, n: int = 2000, seed: int = 0, level: float = 0.95, log: bool = False) -> ParamDiff:
    """Difference in ``param`` ("A", "B" or "C_mid") between two arms of seeded runs.

    The interval comes from :func:`arm_draws` of each arm: it carries both the seed-to-seed spread
    and each fit's own uncertainty. ``log``: compare ln(param) (for B and C_mid, whose effects are
    ratios)."""
    if not boots_a or not boots_b:
        raise UserError("both arms need at least one fitted run")
    f = np.log if log else (lambda v: v)
    rng = np.random.default_rng(seed)

    def value(b: CurveBootstrap, i: int) -> float:
        return float(f(getattr(b, param)[i]))

    lo, hi = _interval(arm_draws(boots_a, value, n, rng) - arm_draws(boots_b, value, n, rng), level)
    a = float(np.mean([f(getattr(fit, param)) for fit, _ in boots_a]))
    b = float(np.mean([f(getattr(fit, param)) for fit, _ in boots_b]))
    return ParamDiff(param, a - b, lo, hi, a, b)


@dataclass(frozen=True)
class ShiftBalance:
    """How much an intervention moved the efficiency exponent B against the ceiling A, both as ratios:
    ``d_ln_B`` = ln(B_a / B_b), ``d_ln_gain`` = ln((A_a - R0_a) / (A_b - R0_b)) (the attainable gain);
    ``balance`` = |d_ln_B| - |d_ln_gain| (> 0: B moved more), with its interval."""

    d_ln_B: float
    d_ln_gain: float
    balance: float
    low: float
    high: float


def _ln_gain(A, R0) -> float:
    return float(np.log(max(float(A) - float(R0), 1e-6)))


def shift_balance(boots_a: list[tuple[CurveFit, CurveBootstrap]], boots_b: list[tuple[CurveFit, CurveBootstrap]],
                  *, n: int = 2000, seed: int = 0, level: float = 0.95) -> ShiftBalance:
    """Arm a (an intervention) against arm b (the reference): did it move B more than A, in relative
    terms? Each draw pairs one :func:`arm_draws` draw of each arm (ln B and ln(A - R0) from the same
    replicates) -> :class:`ShiftBalance`."""
    if not boots_a or not boots_b:
        raise UserError("both arms need at least one fitted run")
    rng = np.random.default_rng(seed)

    def joint(boots):  # (n, 2): ln B and ln gain from the same draws of seeds and replicates
        state = rng.bit_generator.state
        lb = arm_draws(boots, lambda b, i: float(np.log(b.B[i])), n, rng)
        rng.bit_generator.state = state
        lg = arm_draws(boots, lambda b, i: _ln_gain(b.A[i], b.R0[i]), n, rng)
        return lb, lg

    (lb_a, lg_a), (lb_b, lg_b) = joint(boots_a), joint(boots_b)
    draws = np.abs(lb_a - lb_b) - np.abs(lg_a - lg_b)
    lo, hi = _interval(draws, level)
    mean_lb = [float(np.mean([np.log(f.B) for f, _ in arm])) for arm in (boots_a, boots_b)]
    mean_lg = [float(np.mean([_ln_gain(f.A, f.R0) for f, _ in arm])) for arm in (boots_a, boots_b)]
    d_b, d_g = mean_lb[0] - mean_lb[1], mean_lg[0] - mean_lg[1]
    return ShiftBalance(d_b, d_g, abs(d_b) - abs(d_g), lo, hi)


@dataclass(frozen=True)
class Crossing:
    """Two settings' curves: who leads early, who ends higher, and whom an early fit picks."""

    early_leader: str  # "a" or "b": higher measured pass rate at the early compute
    final_leader: str  # higher measured pass rate at the end
    predicted_leader: str  # higher predicted final pass rate from the fits on the early part
    crossed: bool  # early_leader != final_leader
    ranked_right: bool  # predicted_leader == final_leader
    early_gap: float = 0.0  # a - b: early mean pass rates
    final_gap: float = 0.0  # a - b: final mean pass rates


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
    ea, eb = early_mean(Ca, Ra), early_mean(Cb, Rb)
    fa, fb = float(Ra[Ca <= c_end][-n_last:].mean()), float(Rb[Cb <= c_end][-n_last:].mean())
    early, final = lead(ea, eb), lead(fa, fb)
    predicted = lead(pred(Ca, Ra), pred(Cb, Rb))
    return Crossing(early, final, predicted, early != final, predicted == final, ea - eb, fa - fb)
