"""How well a curve's early part predicts the rest, under three forms, and how well early numbers
rank several runs' ends: the sigmoid's case against unbounded forms (ScaleRL, Khatri et al. 2025).

Pure functions over arrays (one curve = compute C (N,), increasing, and held-out pass rate R (N,)).
Formulas: docs/methods/scaling_curves.md, section "Extrapolation against other forms".

- sigmoid: :func:`rlvr.analysis.curves.fit_sigmoid` with R0 fixed to the first point (bounded by 1);
- power law: R = a C^b, least squares of ln R on ln C (no ceiling);
- log-linear: R = alpha + beta ln C, least squares (no ceiling).
"""

from __future__ import annotations

import numpy as np
from scipy.stats import rankdata

from rlvr.analysis.curves import fit_sigmoid, sigmoid_curve
from rlvr.errors import UserError


def _line(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(intercept, slope) of the least-squares line y = intercept + slope x; x, y: (N,), N >= 2."""
    slope, intercept = np.polyfit(x, y, 1)
    return float(intercept), float(slope)


def power_law_fit(C, R) -> tuple[float, float]:
    """(a, b) of R = a C^b by least squares of ln R on ln C. C, R: (N,) with R > 0."""
    C, R = np.asarray(C, dtype=float), np.asarray(R, dtype=float)
    if (R <= 0).any():
        raise UserError("a power law needs every pass rate > 0 (ln R)")
    ln_a, b = _line(np.log(C), np.log(R))
    return float(np.exp(ln_a)), b


def log_linear_fit(C, R) -> tuple[float, float]:
    """(alpha, beta) of R = alpha + beta ln C by least squares. C, R: (N,)."""
    return _line(np.log(np.asarray(C, dtype=float)), np.asarray(R, dtype=float))


def sigmoid_predict(C_fit, R_fit, C_new) -> np.ndarray:
    """The sigmoid fitted on (C_fit, R_fit) (N,) with R0 fixed to the first point, at C_new (M,) -> (M,)."""
    fit = fit_sigmoid(C_fit, R_fit, R0=float(np.asarray(R_fit)[0]))
    return sigmoid_curve(np.asarray(C_new, dtype=float), fit.R0, fit.A, fit.B, fit.C_mid)


def power_law_predict(C_fit, R_fit, C_new) -> np.ndarray:
    """The power law fitted on (C_fit, R_fit) (N,), at C_new (M,) -> (M,)."""
    a, b = power_law_fit(C_fit, R_fit)
    return a * np.asarray(C_new, dtype=float) ** b


def log_linear_predict(C_fit, R_fit, C_new) -> np.ndarray:
    """The log-linear line fitted on (C_fit, R_fit) (N,), at C_new (M,) -> (M,)."""
    alpha, beta = log_linear_fit(C_fit, R_fit)
    return alpha + beta * np.log(np.asarray(C_new, dtype=float))


FORMS = {"sigmoid": sigmoid_predict, "power_law": power_law_predict, "log_linear": log_linear_predict}
"""Each curve form by name: (C_fit, R_fit, C_new) -> the fitted curve at C_new."""


def extrapolation_error(form: str, C, R, fraction: float) -> float:
    """Mean absolute error of ``form`` fitted on the points with C <= ``fraction`` x the last C and
    evaluated at every later point. C, R: (N,)."""
    C, R = np.asarray(C, dtype=float), np.asarray(R, dtype=float)
    early = C <= fraction * C[-1]
    if early.sum() < 4 or early.all():
        raise UserError(f"a fit on the first {fraction:.0%} of compute needs at least 4 points there and one after "
                        f"(has {int(early.sum())} of {C.size})")
    if form not in FORMS:
        raise UserError(f"unknown curve form {form!r}; use one of {', '.join(FORMS)}")
    return float(np.mean(np.abs(FORMS[form](C[early], R[early], C[~early]) - R[~early])))


def spearman(x, y) -> float:
    """Spearman's rank correlation of x, y (N,) (ties take their average rank); NaN when either is
    constant."""
    rx, ry = rankdata(x), rankdata(y)
    if np.ptp(rx) == 0 or np.ptp(ry) == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


def early_mean(C, R, fraction: float) -> float:
    """The mean pass rate over the points with C <= ``fraction`` x the last C, from the second point
    on (the first is the start, shared by every arm). C, R: (N,)."""
    C, R = np.asarray(C, dtype=float), np.asarray(R, dtype=float)
    picked = (C <= fraction * C[-1]) & (np.arange(C.size) > 0)
    if not picked.any():
        raise UserError(f"no point after the first within the first {fraction:.0%} of compute")
    return float(R[picked].mean())


def final_mean(R, n_last: int = 3) -> float:
    """The mean of the last ``n_last`` pass rates of R (N,) (one evaluation's noise averaged)."""
    return float(np.mean(np.asarray(R, dtype=float)[-n_last:]))


def early_fit_final(C, R, fraction: float) -> float:
    """The sigmoid fitted on the first ``fraction`` of compute (R0 fixed to the first point),
    evaluated at the last compute. C, R: (N,)."""
    C, R = np.asarray(C, dtype=float), np.asarray(R, dtype=float)
    early = C <= fraction * C[-1]
    return float(sigmoid_predict(C[early], R[early], C[-1:])[0])
