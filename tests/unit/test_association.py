"""Correlation with cluster-bootstrap intervals (rlvr.analysis.association), against hand values."""

from __future__ import annotations

import numpy as np
import pytest

from rlvr.analysis.association import associate, pearson, spearman
from rlvr.errors import UserError


def test_hand_values():
    x = np.array([1.0, 2.0, 3.0, 4.0])
    assert pearson(x, 2 * x + 1) == pytest.approx(1.0)
    assert pearson(x, -x) == pytest.approx(-1.0)
    # y = [1, 3, 2, 4]: cov = 2.5/... by hand: dx = [-1.5,-.5,.5,1.5], dy = [-1.5,.5,-.5,1.5] -> 4/5
    assert pearson(x, np.array([1.0, 3.0, 2.0, 4.0])) == pytest.approx(0.8)
    # monotone but not linear: Spearman 1, Pearson below 1
    assert spearman(x, x**3) == pytest.approx(1.0) and pearson(x, x**3) < 1
    # ties get average ranks: ranks of [1, 1, 2] are [0.5, 0.5, 2]
    assert spearman(np.array([1.0, 1.0, 2.0]), np.array([0.0, 1.0, 2.0])) == pytest.approx(pearson(
        np.array([0.5, 0.5, 2.0]), np.array([0.0, 1.0, 2.0])))
    assert np.isnan(pearson(x, np.ones(4)))


def test_interval_excludes_zero_for_a_real_link_and_covers_it_for_noise():
    rng = np.random.default_rng(0)
    x = rng.normal(size=30)
    a = associate(x, x + 0.5 * rng.normal(size=30), n_boot=500)
    assert a.r > 0.7 and a.r_low > 0.4 and a.rho_low > 0.3
    b = associate(x, rng.normal(size=30), n_boot=500)
    assert b.r_low < 0 < b.r_high


def test_groups_are_resampled_whole():
    """Three checkpoints x three seeds, seeds nearly identical: as 9 independent units the interval
    is narrow; as 3 clusters it is wide (only 3 independent points)."""
    rng = np.random.default_rng(1)
    x3, y3 = np.array([0.1, 0.2, 0.3]), np.array([0.2, 0.1, 0.5])
    x = np.repeat(x3, 3) + rng.normal(0, 1e-3, 9)
    y = np.repeat(y3, 3) + rng.normal(0, 1e-3, 9)
    flat = associate(x, y, n_boot=500)
    grouped = associate(x, y, groups=np.repeat([0, 1, 2], 3), n_boot=500)
    assert (grouped.r_high - grouped.r_low) > (flat.r_high - flat.r_low)
    with pytest.raises(UserError, match="at least 3"):
        associate([1, 2], [1, 2])
