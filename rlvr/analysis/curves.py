"""Sigmoidal compute-performance curves (ScaleRL, arXiv 2510.13786; docs/methods/scaling_curves.md).

    R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B)

C is compute (FLOPs, samples, GPU-hours), R the held-out pass rate, R0 the pass rate at
the start, A <= 1 the asymptote (ceiling), B > 0 the efficiency exponent and C_mid the
compute at which half of the gain A - R0 is reached. Pure numpy/scipy: arrays in, numbers
out. Shapes: N points on one curve; M bootstrap replicates.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from scipy.optimize import least_squares
from scipy.special import expit
from scipy.stats import f as f_dist

from rlvr.errors import UserError

_B_MIN, _B_MAX = 1e-6, 100.0
_LINE_P = 0.01  # bent needs the sigmoid to beat a straight line in ln C at this level
_A_GRID_T = np.unique(np.concatenate([np.geomspace(1e-3, 1.0, 40), np.linspace(0.0, 1.0, 61)[1:]]))


@dataclass(frozen=True)
class CurveFit:
    """A fitted curve. ``bent`` is False when the data do not pin the ceiling down
    (the curve has not bent yet, no gain, or A too uncertain); ``message`` says why."""

    A: float
    B: float
    C_mid: float
    R0: float
    rmse: float  # root mean squared residual over the fitted points
    n_points: int  # points used (compute above min_compute)
    bent: bool
    message: str
    a_se: float = float("nan")  # standard error of A from the Jacobian at the optimum
    r0_fixed: bool = True
    a_at_bound: bool = False  # A stopped at its upper bound a_max: the bound, not a measured ceiling


@dataclass(frozen=True)
class CurveBootstrap:
    """Case-bootstrap replicates of a fit (points resampled with replacement).

    ``A``, ``B``, ``C_mid``, ``R0``: (M,) parameters of the M replicates that fitted;
    ``ci``: parameter -> (low, high) percentile interval at ``level``."""

    A: np.ndarray
    B: np.ndarray
    C_mid: np.ndarray
    R0: np.ndarray
    ci: dict[str, tuple[float, float]]
    level: float
    seed: int
    bent_frac: float  # fraction of replicates that were bent


def sigmoid_curve(C: np.ndarray | float, R0: float, A: float, B: float, C_mid: float) -> np.ndarray:
    """R(C) = R0 + (A - R0) / (1 + (C_mid/C)^B), computed as R0 + (A-R0)*expit(B ln(C/C_mid)).

    C: (N,) positive compute (or a scalar); returns (N,) values (0-d array for a scalar)."""
    C = np.asarray(C, dtype=float)
    with np.errstate(divide="ignore"):  # C = 0 gives ln C = -inf, i.e. R = R0
        return R0 + (A - R0) * expit(B * (np.log(C) - np.log(C_mid)))


def _grid_start(
    x: np.ndarray, R: np.ndarray, R0s: np.ndarray, a_max: float, top: int = 3
) -> list[tuple[float, float, float, float]]:
    """Grid over A above max(R) (and over R0 candidates) with the linearised regression
    ln[(R-R0)/(A-R)] = B x - B ln C_mid; x = ln C: (N,). Returns the ``top`` starts
    (A, B, ln C_mid, R0) with the least squared error in R."""
    r_max = float(R.max())
    A_K = np.array([a_max]) if r_max >= a_max else r_max + (a_max - r_max) * _A_GRID_T
    starts: list[tuple[float, float, float, float, float]] = []
    for R0 in R0s:
        ok_KN = (R[None, :] > R0) & (R[None, :] < A_K[:, None])
        ratio_KN = np.where(ok_KN, (R - R0)[None, :] / np.where(ok_KN, A_K[:, None] - R[None, :], 1.0), 1.0)
        z_KN = np.log(ratio_KN)
        w_KN = ok_KN.astype(float)
        n_K = w_KN.sum(1)
        safe_n = np.maximum(n_K, 1.0)
        mx_K = (w_KN * x).sum(1) / safe_n
        mz_K = (w_KN * z_KN).sum(1) / safe_n
        dx_KN = (x[None, :] - mx_K[:, None]) * w_KN
        sxx_K = (dx_KN**2).sum(1)
        B_K = (dx_KN * (z_KN - mz_K[:, None])).sum(1) / np.maximum(sxx_K, 1e-300)
        good_K = (n_K >= 2) & (sxx_K > 0) & (B_K > 0)
        if not good_K.any():
            continue
        B_K = np.clip(B_K, _B_MIN, _B_MAX)
        lnmid_K = mx_K - mz_K / B_K
        pred_KN = R0 + (A_K - R0)[:, None] * expit(B_K[:, None] * (x[None, :] - lnmid_K[:, None]))
        sse_K = np.where(good_K, ((pred_KN - R) ** 2).sum(1), np.inf)
        for k in np.argsort(sse_K)[:top]:
            if np.isfinite(sse_K[k]):
                starts.append((float(sse_K[k]), float(A_K[k]), float(B_K[k]), float(lnmid_K[k]), float(R0)))
    starts.sort(key=lambda s: s[0])
    return [s[1:] for s in starts[:top]]


def _refine(
    x: np.ndarray, R: np.ndarray, start: tuple[float, ...], R0_fixed: float | None, a_max: float
):
    """Bounded least squares on (A, B, ln C_mid[, R0]) from one start; x = ln C: (N,)."""
    A, B, lnmid, R0 = start
    span = float(x.max() - x.min()) + 1.0
    lo_m, hi_m = float(x.min()) - 10 * span, float(x.max()) + 10 * span
    if R0_fixed is None:
        lb, ub = [0.0, _B_MIN, lo_m, 0.0], [a_max, _B_MAX, hi_m, a_max]
        p0 = [A, B, lnmid, R0]
    else:
        lb, ub = [R0_fixed, _B_MIN, lo_m], [a_max, _B_MAX, hi_m]
        p0 = [A, B, lnmid]

    def resid(p: np.ndarray) -> np.ndarray:
        r0 = p[3] if R0_fixed is None else R0_fixed
        return r0 + (p[0] - r0) * expit(p[1] * (x - p[2])) - R

    def jac(p: np.ndarray) -> np.ndarray:  # (N, p) analytic Jacobian
        r0 = p[3] if R0_fixed is None else R0_fixed
        sg = expit(p[1] * (x - p[2]))
        d = (p[0] - r0) * sg * (1.0 - sg)
        cols = [sg, d * (x - p[2]), -d * p[1]] + ([1.0 - sg] if R0_fixed is None else [])
        return np.stack(cols, axis=1)

    p0 = np.clip(p0, np.array(lb) + 1e-12, np.array(ub) - 1e-12)
    return least_squares(resid, p0, jac=jac, bounds=(lb, ub), method="trf")


def _a_standard_error(res, n: int) -> float:
    """se(A) = sqrt(s^2 [(J^T J)^-1]_00), s^2 = SSE / (N - p)."""
    p = res.x.size
    if n <= p:
        return float("inf")
    s2 = 2.0 * res.cost / (n - p)
    try:
        cov = np.linalg.inv(res.jac.T @ res.jac)
    except np.linalg.LinAlgError:
        return float("inf")
    var = s2 * cov[0, 0]
    return float(np.sqrt(var)) if np.isfinite(var) and var >= 0 else float("inf")


def _line_pvalue(x: np.ndarray, R: np.ndarray, sse_sig: float, p_sig: int) -> float:
    """p-value of an F-test that the sigmoid fits better than a straight line R = a + b ln C.

    x = ln C, R: (N,). A large p-value means the data show no bend (yet)."""
    n = x.size
    if n <= p_sig:
        return 1.0
    coef = np.polyfit(x, R, 1)
    sse_line = float(((np.polyval(coef, x) - R) ** 2).sum())
    if sse_sig <= 0.0:
        return 0.0 if sse_line > 0.0 else 1.0
    F = (sse_line - sse_sig) / (p_sig - 2) / (sse_sig / (n - p_sig))
    return float(f_dist.sf(F, p_sig - 2, n - p_sig)) if F > 0 else 1.0


def _judge(fit: CurveFit, c_max: float, line_p: float, max_a_se: float, a_max: float) -> tuple[bool, str]:
    """(bent, message) for a fitted curve; c_max: the largest fitted compute; a_max: A's upper bound."""
    A, R0, a_se = fit.A, fit.R0, fit.a_se
    if A - R0 < max(0.01, 2.0 * fit.rmse):
        return False, f"not bent: no measurable gain over R0 (A - R0 = {A - R0:.3f}); nothing to extrapolate"
    if fit.C_mid > c_max:
        return False, (
            f"not bent yet: fitted C_mid = {fit.C_mid:.3g} lies beyond the last point ({c_max:.3g}), so "
            "the ceiling A is not identified; add compute before trusting A"
        )
    if line_p > _LINE_P:
        return False, (
            f"not bent yet: a straight line in log C fits as well as the sigmoid (F-test p = {line_p:.2g}), "
            "so the ceiling A is not identified; add compute before trusting A"
        )
    if not a_se <= max_a_se:
        return False, (
            f"not bent: A = {A:.3f} is too uncertain (standard error {a_se:.3g} > {max_a_se}); "
            "add compute or evaluate on a larger held-out set"
        )
    if fit.a_at_bound:  # bent all the same (the method), but the bound is not a measured ceiling
        return True, (f"bent, but A sits at its bound {a_max:g}: the fit found no ceiling below it, so A is "
                      "the bound, not a measurement (docs/methods/scaling_curves.md)")
    return True, f"bent: A = {A:.3f} +- {a_se:.3f} (1 s.e.), C_mid within the data"


def _fit_arrays(
    C: np.ndarray, R: np.ndarray, R0: float | None, a_max: float, max_a_se: float, top: int = 3
) -> CurveFit:
    """Fit on already-filtered points C, R: (N,) with C > 0."""
    x = np.log(C)
    if R0 is None:
        r_min, span = float(R.min()), float(R.max() - R.min())
        R0s = np.unique(np.clip(r_min - span * np.array([0.0, 0.02, 0.05, 0.1, 0.2, 0.4, 0.8]), 0.0, None))
    else:
        R0s = np.array([R0])
    starts = _grid_start(x, R, R0s, a_max, top) or [
        (min(a_max, float(R.max()) + 0.01), 1.0, float(np.median(x)), float(R0s[0]))
    ]
    best = min((_refine(x, R, s, R0, a_max) for s in starts), key=lambda r: r.cost)
    A, B, lnmid = (float(v) for v in best.x[:3])
    R0_hat = float(R0) if R0 is not None else float(best.x[3])
    rmse = float(np.sqrt(2.0 * best.cost / C.size))
    a_se = _a_standard_error(best, C.size)
    fit = CurveFit(A, B, float(np.exp(lnmid)), R0_hat, rmse, int(C.size), False, "", a_se, R0 is not None,
                   a_at_bound=A >= a_max - 1e-6)
    line_p = _line_pvalue(x, R, 2.0 * best.cost, best.x.size)
    bent, message = _judge(fit, float(C.max()), line_p, max_a_se, a_max)
    return replace(fit, bent=bent, message=message)


def _select(C, R, min_compute: float) -> tuple[np.ndarray, np.ndarray]:
    """Validated (N,) arrays of the points with C > max(min_compute, 0)."""
    C, R = np.asarray(C, dtype=float).ravel(), np.asarray(R, dtype=float).ravel()
    if C.shape != R.shape:
        raise UserError(f"compute has {C.size} values, pass rate {R.size}; give one pass rate per point")
    if not (np.isfinite(C).all() and np.isfinite(R).all()):
        raise UserError("compute or pass rate contains NaN/inf; remove those points")
    keep = C > max(min_compute, 0.0)
    return C[keep], R[keep]


def fit_sigmoid(
    C,
    R,
    *,
    R0: float | None = None,
    min_compute: float = 0.0,
    a_max: float = 1.0,
    max_a_se: float = 0.03,
) -> CurveFit:
    """Fit R(C) by the robust procedure of docs/methods/scaling_curves.md.

    C, R: (N,) compute and held-out pass rate. Points with C <= min_compute are dropped
    (the initial low-compute part; C must be > 0 for ln C). R0: fixed when given (the
    measured starting pass rate), else fitted. A is bounded to [R0, a_max], B > 0.
    Grid over A above max(R) -> linear regression of ln[(R-R0)/(A-R)] on ln C -> keep the
    A with least squared error in R -> refine all parameters by bounded least squares.
    The fit is ``bent=False`` (with a message) when C_mid lies beyond the data, the gain
    over R0 is not measurable, or se(A) > max_a_se.
    """
    C, R = _select(C, R, min_compute)
    n_params = 3 if R0 is not None else 4
    if C.size < n_params + 1:
        raise UserError(
            f"only {C.size} points with compute > {min_compute:g}; need at least {n_params + 1} "
            "to fit the curve (lower --min-compute / --fit-until or evaluate more often)"
        )
    if R0 is not None and not 0.0 <= R0 < a_max:
        raise UserError(f"R0 = {R0} must lie in [0, a_max={a_max}); give the start pass rate as a fraction")
    return _fit_arrays(C, R, R0, a_max, max_a_se)


def bootstrap_fit(
    C,
    R,
    n_boot: int = 200,
    seed: int = 0,
    *,
    R0: float | None = None,
    min_compute: float = 0.0,
    a_max: float = 1.0,
    level: float = 0.95,
    r0_sd: float = 0.0,
) -> CurveBootstrap:
    """Case bootstrap: refit on N points drawn with replacement, n_boot times.

    C, R: (N,). A fixed R0 stays fixed in every replicate, unless ``r0_sd`` > 0: then
    each replicate fixes R0 + N(0, r0_sd^2) (clipped to [0, a_max)), which carries the
    measurement noise of a measured starting pass rate into the intervals. Returns the (M,) replicate
    parameters (M <= n_boot: resamples with too few distinct points are skipped) and
    percentile intervals at ``level`` (C_mid's interval is taken in log space)."""
    C, R = _select(C, R, min_compute)
    need = 4 if R0 is None else 3
    if C.size < need + 1:
        raise UserError(f"only {C.size} points to bootstrap; need at least {need + 1}")
    rng = np.random.default_rng(seed)
    fits: list[CurveFit] = []
    for _ in range(n_boot):
        idx = np.sort(rng.integers(0, C.size, C.size))
        if np.unique(idx).size < need:
            continue
        r0 = R0
        if R0 is not None and r0_sd > 0:
            r0 = float(np.clip(R0 + rng.normal(0.0, r0_sd), 0.0, a_max - 1e-6))
        fits.append(_fit_arrays(C[idx], R[idx], r0, a_max, max_a_se=np.inf, top=1))
    if not fits:
        raise UserError("no bootstrap replicate could be fitted; add more points")
    arr = {k: np.array([getattr(f, k) for f in fits]) for k in ("A", "B", "C_mid", "R0")}
    q = [(1 - level) / 2 * 100, (1 + level) / 2 * 100]
    ci = {k: tuple(float(v) for v in np.percentile(arr[k], q)) for k in ("A", "B", "R0")}
    ci["C_mid"] = tuple(float(v) for v in np.exp(np.percentile(np.log(arr["C_mid"]), q)))
    bent_frac = float(np.mean([f.bent for f in fits]))
    return CurveBootstrap(arr["A"], arr["B"], arr["C_mid"], arr["R0"], ci, level, seed, bent_frac)


def fit_with_bootstrap(C, R, *, R0: float | None, n_boot: int = 200, seed: int = 0, max_a_se: float = 0.03,
                       level: float = 0.95) -> tuple[CurveFit, CurveBootstrap | None]:
    """:func:`fit_sigmoid` (R0 fixed when given, else fitted) and, when ``n_boot`` > 0, its case
    bootstrap, with a fixed R0 perturbed by the fit's residual sd in every replicate (a measured
    start is one noisy point) and ``bent`` withdrawn when C_mid's interval leaves the data
    (:func:`judge_interval`). C, R: (N,). Without a bootstrap the second value is None."""
    fit = fit_sigmoid(C, R, R0=R0, max_a_se=max_a_se)
    if not n_boot:
        return fit, None
    boot = bootstrap_fit(C, R, n_boot=n_boot, seed=seed, R0=R0, r0_sd=fit.rmse if R0 is not None else 0.0,
                         level=level)
    return judge_interval(fit, boot, float(np.max(C))), boot


def predict(fit: CurveFit, C, boot: CurveBootstrap | None = None):
    """Value of the fitted curve at C with a prediction interval.

    C: scalar or (N,). Returns (value, low, high), each a float for scalar C, else (N,).
    The interval (at ``boot.level``) holds the bootstrap curves at C plus Gaussian
    residual noise of sd rmse * sqrt(N/(N-p)), clipped to [0, 1]; without ``boot``
    low and high are NaN (the fit alone gives no honest interval for extrapolation)."""
    scalar = np.ndim(C) == 0
    C_N = np.atleast_1d(np.asarray(C, dtype=float))
    value_N = sigmoid_curve(C_N, fit.R0, fit.A, fit.B, fit.C_mid)
    if boot is None:
        low_N = high_N = np.full_like(value_N, np.nan)
    else:
        curves_MN = sigmoid_curve(C_N[None, :], boot.R0[:, None], boot.A[:, None], boot.B[:, None],
                                  boot.C_mid[:, None])
        p = 3 if fit.r0_fixed else 4
        sigma = fit.rmse * np.sqrt(fit.n_points / max(fit.n_points - p, 1))
        noise_MN = np.random.default_rng(boot.seed + 1).normal(0.0, sigma, curves_MN.shape)
        q = [(1 - boot.level) / 2 * 100, (1 + boot.level) / 2 * 100]
        low_N, high_N = np.clip(np.percentile(curves_MN + noise_MN, q, axis=0), 0.0, 1.0)
    if scalar:
        return float(value_N[0]), float(low_N[0]), float(high_N[0])
    return value_N, low_N, high_N


def judge_interval(fit: CurveFit, boot: CurveBootstrap, c_max: float) -> CurveFit:
    """``fit`` with ``bent`` withdrawn when the bootstrap's interval on C_mid reaches beyond the
    last fitted compute ``c_max``: the point estimate may lie inside the data while the data cannot
    tell whether the curve has bent yet (a ceiling read off such a fit is an extrapolation)."""
    lo, hi = boot.ci["C_mid"]
    if not fit.bent or hi <= c_max:
        return fit
    level = round(boot.level * 100)
    return replace(fit, bent=False, message=(
        f"not bent: C_mid = {fit.C_mid:.3g} but its {level}% interval [{lo:.3g}, {hi:.3g}] reaches beyond the "
        f"last point ({c_max:.3g}), so the data cannot tell whether the curve has bent; add compute"))


def fit_shared_r0(curves: list[tuple[np.ndarray, np.ndarray]], *, a_max: float = 1.0,
                  max_a_se: float = 0.03) -> tuple[float, list[CurveFit]]:
    """Fit several runs that start from the same model with one shared R0 (each run its own A, B,
    C_mid): R0 minimises the summed squared error of the per-run fits with R0 fixed (a bounded 1-D
    search over [0, min over runs of max R)). curves: [(C (N_i,), R (N_i,))], already filtered
    (C > 0). -> (R0, one CurveFit per run, each with ``r0_fixed`` False)."""
    from scipy.optimize import minimize_scalar

    if not curves:
        raise UserError("no runs to fit; give at least one")
    sel = [_select(C, R, 0.0) for C, R in curves]
    for C, _ in sel:
        if C.size < 5:
            raise UserError(f"a run has only {C.size} points; a shared-R0 fit needs at least 5 per run")
    hi = min(float(R.max()) for _, R in sel) - 1e-4
    if hi <= 0:
        raise UserError("a run never rises above a pass rate of 0; nothing to fit")

    def total(r0: float) -> float:
        return sum(_fit_arrays(C, R, r0, a_max, np.inf, top=1).rmse ** 2 * C.size for C, R in sel)

    grid = np.linspace(0.0, hi, 9)
    best = float(grid[int(np.argmin([total(g) for g in grid]))])
    step = hi / 8
    res = minimize_scalar(total, bounds=(max(0.0, best - step), min(hi, best + step)), method="bounded",
                          options={"xatol": 1e-4})
    r0 = float(res.x) if res.fun <= total(best) else best
    fits = [replace(_fit_arrays(C, R, r0, a_max, max_a_se), r0_fixed=False) for C, R in sel]
    return r0, fits
