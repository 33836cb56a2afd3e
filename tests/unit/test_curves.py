"""Sigmoidal compute-performance curve fitting (rlvr.analysis.curves; docs/methods/scaling_curves.md)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rlvr.analysis.curves import bootstrap_fit, fit_sigmoid, predict, sigmoid_curve
from rlvr.errors import UserError

NOISE = 0.01


def _noisy(R0: float, A: float, B: float, C_mid: float, C: np.ndarray, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return sigmoid_curve(C, R0, A, B, C_mid) + rng.normal(0.0, NOISE, C.size)


def test_sigmoid_curve_hand_values():
    # (C_mid/C)^B = (10/20)^2 = 0.25 -> R = 0.1 + 0.5 / 1.25 = 0.5
    assert float(sigmoid_curve(20.0, 0.1, 0.6, 2.0, 10.0)) == pytest.approx(0.5, abs=1e-12)
    # half of the gain at C_mid; R0 at C = 0; A far beyond C_mid
    assert float(sigmoid_curve(10.0, 0.1, 0.6, 2.0, 10.0)) == pytest.approx(0.35, abs=1e-12)
    assert float(sigmoid_curve(0.0, 0.1, 0.6, 2.0, 10.0)) == pytest.approx(0.1, abs=1e-12)
    assert float(sigmoid_curve(1e9, 0.1, 0.6, 2.0, 10.0)) == pytest.approx(0.6, abs=1e-12)
    # huge compute values (FLOPs) do not overflow
    assert float(sigmoid_curve(3e18, 0.2, 0.8, 1.0, 1e18)) == pytest.approx(0.2 + 0.6 * 0.75, abs=1e-12)


def test_noise_free_data_recovered_exactly():
    C = np.geomspace(1e16, 1e20, 25)
    R = sigmoid_curve(C, 0.15, 0.72, 1.3, 4e17)
    fit = fit_sigmoid(C, R, R0=0.15)
    assert fit.A == pytest.approx(0.72, abs=1e-6)
    assert fit.B == pytest.approx(1.3, rel=1e-5)
    assert fit.C_mid == pytest.approx(4e17, rel=1e-5)
    assert fit.rmse < 1e-7 and fit.bent and fit.n_points == 25


SETTINGS = [(0.10, 0.60, 1.0, 1e3), (0.20, 0.85, 2.0, 1e18), (0.05, 0.40, 0.7, 5e4), (0.30, 0.95, 1.5, 1e2)]


@pytest.mark.parametrize("R0,A,B,C_mid", SETTINGS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_recovery_with_data_beyond_c_mid(R0, A, B, C_mid, seed):
    C = np.geomspace(C_mid / 30, C_mid * 30, 30)
    fit = fit_sigmoid(C, _noisy(R0, A, B, C_mid, C, seed), R0=R0)
    assert abs(fit.A - A) < 0.02
    assert abs(fit.B / B - 1) < 0.15
    assert abs(fit.C_mid / C_mid - 1) < 0.15
    assert fit.bent, fit.message


def test_recovery_linear_compute_grid_free_r0():
    # a run-like grid: held-out evaluation every k steps, compute linear in steps
    C = np.linspace(2e4 / 5, 8 * 2e4, 40)
    fit = fit_sigmoid(C, _noisy(0.1, 0.55, 2.5, 2e4, C, 3))
    assert not fit.r0_fixed
    assert abs(fit.A - 0.55) < 0.02 and abs(fit.B / 2.5 - 1) < 0.15 and abs(fit.R0 - 0.1) < 0.05
    assert fit.bent


@pytest.mark.parametrize(
    "name,R",
    [
        ("power law", lambda C: 0.05 + 0.02 * (C / 1e2) ** 0.25),
        ("linear in log C", lambda C: 0.1 + 0.05 * np.log10(C / 1e2)),
        ("stops before C_mid", lambda C: sigmoid_curve(C, 0.1, 0.7, 1.0, 1e8)),
        ("stops just before C_mid", lambda C: sigmoid_curve(C, 0.1, 0.7, 1.0, 3e6)),
    ],
)
@pytest.mark.parametrize("r0_fixed", [True, False])
def test_curve_that_never_bends_is_reported(name, R, r0_fixed):
    C = np.geomspace(1e2, 1e6, 30)
    y = R(C) + np.random.default_rng(0).normal(0.0, NOISE, C.size)
    fit = fit_sigmoid(C, y, R0=float(R(C[:1])[0]) if r0_fixed else None)
    assert not fit.bent, (name, fit)
    assert "not bent" in fit.message


def test_flat_curve_has_no_gain():
    C = np.geomspace(1e2, 1e6, 30)
    y = 0.3 + np.random.default_rng(1).normal(0.0, NOISE, C.size)
    fit = fit_sigmoid(C, y)
    assert not fit.bent and "not bent" in fit.message


def test_min_compute_drops_the_early_points_and_zero_compute():
    C = np.concatenate([[0.0], np.geomspace(10, 1e5, 30)])
    R = np.concatenate([[0.1], _noisy(0.1, 0.6, 1.0, 1e3, C[1:], 0)])
    assert fit_sigmoid(C, R, R0=0.1).n_points == 30  # C = 0 never enters ln C
    fit = fit_sigmoid(C, R, R0=0.1, min_compute=100.0)
    assert fit.n_points == int((C > 100.0).sum()) == 22
    assert abs(fit.A - 0.6) < 0.02


def test_bad_inputs_raise_user_error():
    C = np.geomspace(1, 100, 10)
    with pytest.raises(UserError, match="need at least 5"):
        fit_sigmoid(C, sigmoid_curve(C, 0.1, 0.6, 1, 10), min_compute=30)
    with pytest.raises(UserError, match="NaN"):
        fit_sigmoid(C, np.where(C > 50, np.nan, 0.3))
    with pytest.raises(UserError, match="one pass rate per point"):
        fit_sigmoid(C, np.zeros(3))
    with pytest.raises(UserError, match="R0"):
        fit_sigmoid(C, np.full(10, 0.3), R0=1.0)


def test_bootstrap_intervals_and_extrapolation():
    R0, A, B, C_mid = 0.15, 0.7, 1.2, 3e17
    C = np.linspace(8 * C_mid / 40, 8 * C_mid, 40)
    R = _noisy(R0, A, B, C_mid, C, 0)
    half = C <= C[-1] / 2
    fit = fit_sigmoid(C[half], R[half], R0=R0)
    boot = bootstrap_fit(C[half], R[half], n_boot=60, seed=0, R0=R0)
    assert 50 <= boot.A.size <= 60 and boot.level == 0.95
    lo, hi = boot.ci["A"]
    assert lo < fit.A < hi and lo <= A <= hi and hi - lo < 0.1
    assert boot.ci["C_mid"][0] < C_mid < boot.ci["C_mid"][1]
    value, low, high = predict(fit, float(C[-1]), boot)
    truth = float(sigmoid_curve(C[-1], R0, A, B, C_mid))
    assert isinstance(value, float) and low < value < high
    assert abs(value - truth) < 0.02 and low <= truth <= high
    # same seed, same replicates
    again = bootstrap_fit(C[half], R[half], n_boot=60, seed=0, R0=R0)
    np.testing.assert_array_equal(again.A, boot.A)


def test_predict_arrays_and_without_bootstrap():
    C = np.geomspace(1, 1e4, 20)
    fit = fit_sigmoid(C, sigmoid_curve(C, 0.1, 0.6, 1.0, 100.0), R0=0.1)
    value, low, high = predict(fit, np.array([100.0, 1e6]))
    np.testing.assert_allclose(value, [0.35, 0.1 + 0.5 / (1 + 1e-4)], atol=1e-6)
    assert np.isnan(low).all() and np.isnan(high).all()
    v, lo, hi = predict(fit, 100.0)
    assert v == pytest.approx(0.35, abs=1e-6) and math.isnan(lo) and math.isnan(hi)


def test_fixed_r0_noise_widens_the_bootstrap():
    C = np.geomspace(10, 1e5, 25)
    R = _noisy(0.1, 0.6, 1.0, 1e3, C, 4)
    tight = bootstrap_fit(C, R, n_boot=40, seed=1, R0=0.1)
    loose = bootstrap_fit(C, R, n_boot=40, seed=1, R0=0.1, r0_sd=0.05)
    assert np.all(tight.R0 == 0.1) and loose.R0.std() > 0.02
    assert np.ptp(loose.ci["B"]) > np.ptp(tight.ci["B"])


def test_shared_r0_recovered_from_runs_with_one_start():
    """Three runs from one base (R0 = 0.2) with different ceilings and speeds: the shared-R0 fit
    finds R0 and each run's A; fixing R0 to each run's noisy first point would not be shared."""
    from rlvr.analysis.curves import fit_shared_r0

    truth = [(0.70, 1.5, 2e3), (0.55, 2.0, 5e3), (0.80, 1.0, 1e3)]
    curves = []
    for i, (A, B, C_mid) in enumerate(truth):
        C = np.geomspace(C_mid / 20, C_mid * 40, 30)
        curves.append((C, _noisy(0.2, A, B, C_mid, C, 10 + i)))
    r0, fits = fit_shared_r0(curves)
    assert r0 == pytest.approx(0.2, abs=0.02)
    for fit, (A, _, _) in zip(fits, truth):
        assert fit.R0 == r0 and not fit.r0_fixed
        assert abs(fit.A - A) < 0.03
    # noise-free: exact
    exact = [(C, sigmoid_curve(C, 0.2, A, B, Cm)) for (C, _), (A, B, Cm) in zip(curves, truth)]
    r0, fits = fit_shared_r0(exact)
    assert r0 == pytest.approx(0.2, abs=1e-3) and all(abs(f.A - A) < 1e-3 for f, (A, _, _) in zip(fits, truth))
    with pytest.raises(UserError, match="at least 5"):
        fit_shared_r0([(np.array([1.0, 2.0]), np.array([0.1, 0.2]))])


def test_bent_is_withdrawn_when_c_mid_interval_reaches_beyond_the_data():
    """A curve whose data end near its midpoint: the point fit may call it bent; the bootstrap
    interval on C_mid reaching past the last point withdraws that."""
    from rlvr.analysis.curves import CurveBootstrap, judge_interval

    C = np.geomspace(1e2, 1e4, 30)
    fit = fit_sigmoid(C, sigmoid_curve(C, 0.1, 0.7, 1.2, 2e3), R0=0.1)
    assert fit.bent
    arr = np.zeros(3)
    wide = CurveBootstrap(arr, arr, arr, arr, {"C_mid": (1e3, 5e4), "A": (0.6, 0.8), "B": (1, 2), "R0": (0.1, 0.1)},
                          0.95, 0, 1.0)
    out = judge_interval(fit, wide, float(C.max()))
    assert not out.bent and "interval" in out.message and "beyond the last point" in out.message
    narrow = CurveBootstrap(arr, arr, arr, arr, {"C_mid": (1.5e3, 3e3), "A": (0.6, 0.8), "B": (1, 2),
                                                 "R0": (0.1, 0.1)}, 0.95, 0, 1.0)
    assert judge_interval(fit, narrow, float(C.max())).bent


def test_a_bent_fit_with_a_at_its_bound_says_the_bound_is_no_measurement():
    # a curve heading for 1.1 seen to 3x its midpoint: the fit bends, and A stops at the bound 1.0
    C = np.geomspace(1e3 / 30, 1e3 * 3, 40)
    fit = fit_sigmoid(C, _noisy(0.2, 1.1, 1.5, 1e3, C, 0), R0=0.2)
    assert fit.bent and fit.a_at_bound and fit.A == pytest.approx(1.0)  # bent unchanged (the method)
    assert "A sits at its bound 1" in fit.message and "not a measurement" in fit.message
    inside = fit_sigmoid(np.geomspace(1e3 / 30, 1e3 * 30, 40), _noisy(0.2, 0.8, 1.5, 1e3, np.geomspace(
        1e3 / 30, 1e3 * 30, 40), 0), R0=0.2)
    assert inside.bent and not inside.a_at_bound and inside.message.startswith("bent: A = 0.79")
