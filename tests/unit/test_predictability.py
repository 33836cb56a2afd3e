"""ScaleRL claim checks on curves (rlvr.analysis.predictability), on synthetic sigmoid curves."""

from __future__ import annotations

import numpy as np
import pytest

from rlvr.analysis.curves import CurveBootstrap, sigmoid_curve
from rlvr.analysis.predictability import (
    arm_draws,
    crossing,
    fit_with_replicates,
    param_diff,
    predict_end,
    shift_balance,
)
from rlvr.errors import UserError


def curve(A, B, C_mid, seed=0, R0=0.2, noise=0.005, n=40, c_max=None):
    C = np.linspace(1.0, c_max or C_mid * 6, n)
    rng = np.random.default_rng(seed)
    R = sigmoid_curve(C, R0, A, B, C_mid) + rng.normal(0, noise, n)
    R[0] = R0
    return C, R


def test_first_half_fit_predicts_a_bent_curve_and_misses_an_unbent_one():
    C, R = curve(0.8, 2.0, 30.0)  # midpoint at 1/6 of the run: bent well inside the first half
    p = predict_end(C, R, 0.5, n_boot=60)
    assert p.fit.bent and abs(p.error) < 0.02 and p.covered
    assert p.n_points == int((C <= 0.5 * C[-1]).sum())
    C, R = curve(0.8, 2.0, 400.0, c_max=240.0)  # still rising at the end: the half fit cannot see A
    p = predict_end(C, R, 0.5, n_boot=60)
    assert not p.fit.bent
    with pytest.raises(UserError, match="fraction"):
        predict_end(C, R, 1.5)


def test_param_diff_finds_the_ceiling_gap_and_not_a_false_one():
    a = [fit_with_replicates(*curve(0.80, 2.0, 30.0, seed=s), n_boot=60, seed=s) for s in range(3)]
    b = [fit_with_replicates(*curve(0.65, 2.0, 30.0, seed=10 + s), n_boot=60, seed=s) for s in range(3)]
    d = param_diff(a, b, "A", n=500)
    assert d.diff == pytest.approx(0.15, abs=0.02) and d.low > 0.1 and d.high < 0.2
    same = [fit_with_replicates(*curve(0.80, 2.0, 30.0, seed=20 + s), n_boot=60, seed=s) for s in range(3)]
    d0 = param_diff(a, same, "A", n=500)
    assert d0.low < 0 < d0.high  # equal ceilings: the interval covers 0
    dB = param_diff(a, b, "B", n=500, log=True)  # equal efficiency: ln-ratio interval covers 0
    assert dB.low < 0 < dB.high


def test_crossing_curves_and_whether_the_early_fit_ranks_them():
    fast_low = curve(0.60, 3.0, 10.0, c_max=200.0)  # ahead early, lower ceiling
    slow_high = curve(0.90, 1.5, 40.0, c_max=200.0, seed=1)  # behind early, ends higher
    c = crossing(fast_low, slow_high, 0.1)
    assert (c.early_leader, c.final_leader, c.crossed) == ("a", "b", True)
    c_late = crossing(fast_low, slow_high, 0.5)  # by half the compute the fits see both bends
    assert c_late.predicted_leader == "b" and c_late.ranked_right


def test_shift_balance_tells_an_efficiency_change_from_a_ceiling_change():
    ref = [fit_with_replicates(*curve(0.80, 2.0, 30.0, seed=s), n_boot=60, seed=s) for s in range(3)]
    slower = [fit_with_replicates(*curve(0.80, 1.0, 30.0, seed=30 + s), n_boot=60, seed=s) for s in range(3)]
    lower = [fit_with_replicates(*curve(0.50, 2.0, 30.0, seed=40 + s), n_boot=60, seed=s) for s in range(3)]
    b = shift_balance(slower, ref, n=500)  # B halved, A kept: |ln 0.5| = 0.69 against ~0
    assert b.d_ln_B == pytest.approx(np.log(0.5), abs=0.15) and abs(b.d_ln_gain) < 0.05
    assert b.balance == pytest.approx(abs(b.d_ln_B) - abs(b.d_ln_gain)) and b.low > 0.3
    c = shift_balance(lower, ref, n=500)  # gain 0.3 against 0.6: |ln 0.5| on the ceiling side, B kept
    assert c.d_ln_gain == pytest.approx(np.log(0.5), abs=0.1) and c.high < -0.3


def test_arm_draws_are_the_mean_of_each_draws_picks_bit_for_bit():
    """Each draw: the seeds resampled, one replicate of each picked seed, their mean; the draws collected
    and averaged at once give exactly the per-draw means (and use the same random stream)."""
    rng = np.random.default_rng(3)
    for seeds in (1, 2, 3, 5):
        sizes = rng.integers(5, 60, seeds)
        boots = [(None, CurveBootstrap(*rng.uniform(0.2, 1.0, (4, size)), {}, 0.95, 0, 0.0)) for size in sizes]
        value = lambda b, i: float(np.log(b.B[i]))  # noqa: E731
        expected, stream = np.empty(300), np.random.default_rng(seeds)
        for d in range(300):
            picks = stream.integers(0, seeds, seeds)
            expected[d] = np.mean([value(boots[k][1], int(stream.integers(0, boots[k][1].A.size))) for k in picks])
        drawn = arm_draws(boots, value, 300, np.random.default_rng(seeds))
        assert np.array_equal(drawn, expected)
