"""rlvr.analysis.trend: the fitted change over the last third, against hand computations."""

import math

import pytest

from rlvr.analysis.trend import Z95, last_part_change


def test_hand_computed_change_and_interval():
    # window: steps >= 2/3 * 90 = 60 -> points (60, .5), (75, .4), (90, .3); slope -1/150 per step
    r = last_part_change([0, 30, 60, 75, 90], [0.1, 0.9, 0.5, 0.4, 0.3], n=100)
    assert r["points"] == 3
    assert r["change"] == pytest.approx(-0.2)
    # var(b) = (225*.25/100 + 0 + 225*.21/100) / 450^2; half width = Z95 * sqrt(var) * 30
    half = Z95 * math.sqrt(225 * (0.0025 + 0.0021)) / 450 * 30
    assert r["lo"] == pytest.approx(-0.2 - half) and r["hi"] == pytest.approx(-0.2 + half)
    assert r["falls"] is (r["hi"] < 0) and r["falls"]


def test_noise_sized_drop_does_not_fall_and_rise_never_falls():
    noisy = last_part_change([100, 120, 150], [0.40, 0.36, 0.38], n=200)  # -0.02, well inside the noise
    assert noisy["change"] < 0 and not noisy["falls"]
    assert not last_part_change([100, 125, 150], [0.3, 0.4, 0.5], n=200)["falls"]
    # more draws per point shrink the interval: the same steady decline falls at n=10000
    assert last_part_change([100, 125, 150], [0.40, 0.37, 0.34], n=10_000)["falls"]
    assert not last_part_change([100, 125, 150], [0.40, 0.37, 0.34], n=50)["falls"]


def test_window_uses_total_steps_and_needs_two_points():
    r = last_part_change([10, 20, 90], [0.5, 0.4, 0.1], n=100, total_steps=150)  # window >= 100: empty
    assert r == {"points": 0, "change": None, "lo": None, "hi": None, "falls": False}
    assert last_part_change([50, 100], [0.5, 0.1], n=100)["points"] == 1  # 2/3 * 100: only step 100
    with pytest.raises(ValueError):
        last_part_change([1, 2], [0.1], n=10)
    with pytest.raises(ValueError):
        last_part_change([1, 2], [0.1, 0.2], n=[10, 0])
