"""Unbiased pass@k: brute force, exact fractions, monotonicity, bootstrap CIs."""

from __future__ import annotations

import itertools
from fractions import Fraction
from math import comb

import numpy as np
import pytest

from rlvr.errors import UserError
from rlvr.eval.passk import bootstrap_ci, default_ks, mean_pass_at_k, pass_at_k, pass_at_k_matrix


def brute_force(n: int, c: int, k: int) -> Fraction:
    """Fraction of all k-subsets of n samples (first c correct) that hold a correct one."""
    subsets = list(itertools.combinations(range(n), k))
    hits = sum(any(i < c for i in s) for s in subsets)
    return Fraction(hits, len(subsets))


def exact(n: int, c: int, k: int) -> Fraction:
    return 1 - Fraction(comb(n - c, k), comb(n, k))


def test_matches_brute_force_enumeration_small_n() -> None:
    for n in range(1, 13):
        for c in range(n + 1):
            ks = list(range(1, n + 1))
            row = pass_at_k_matrix([n], [c], ks)[0]
            for k in ks:
                want = float(brute_force(n, c, k))
                assert pass_at_k(n, c, k) == pytest.approx(want, rel=1e-12, abs=1e-15)
                assert row[k - 1] == pytest.approx(want, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("c", [0, 1, 2, 7, 100, 512, 1000, 1020, 1023, 1024])
def test_exact_fraction_at_n_1024(c: int) -> None:
    n = 1024
    ks = [1, 2, 3, 4, 5, 16, 64, 100, 256, 512, 777, 1000, 1004, 1005, 1023, 1024]
    row = pass_at_k_matrix([n], [c], ks)[0]
    for k, got in zip(ks, row):
        want = float(exact(n, c, k))
        assert got == pytest.approx(want, rel=1e-11, abs=1e-300), (c, k)
        assert pass_at_k(n, c, k) == pytest.approx(want, rel=1e-11, abs=1e-300), (c, k)
        if n - c < k:  # the estimator is exactly 1 there
            assert got == 1.0 and pass_at_k(n, c, k) == 1.0
        if c == 0:
            assert got == 0.0


def test_small_pass_rates_keep_relative_precision_at_n_4096() -> None:
    n = 4096
    for c, k in [(1, 1), (1, 7), (3, 2), (17, 100), (2000, 2), (4000, 96), (4000, 97)]:
        want = float(exact(n, c, k))
        got = pass_at_k_matrix([n], [c], [k])[0, 0]
        assert got == pytest.approx(want, rel=1e-11), (c, k)
    assert pass_at_k(4096, 1, 1) == pytest.approx(1 / 4096, rel=1e-13)
    row = pass_at_k_matrix([4096] * 3, [0, 1, 4096], range(1, 4097))
    assert np.isfinite(row).all() and row[0].max() == 0.0 and (row[2] == 1.0).all()


def test_monotone_non_decreasing_in_k() -> None:
    rng = np.random.default_rng(0)
    n = np.array([rng.integers(1, 300) for _ in range(200)])
    c = np.array([rng.integers(0, m + 1) for m in n])
    ks = np.arange(1, n.min() + 1)
    m = pass_at_k_matrix(n, c, ks)
    assert (np.diff(m, axis=1) >= -1e-15).all()
    assert ((m >= 0) & (m <= 1)).all()
    assert np.allclose(m[:, 0], c / n, rtol=0, atol=1e-14)  # pass@1 is the accuracy


def test_different_n_per_problem_and_k_above_n() -> None:
    m = pass_at_k_matrix([4, 8], [1, 2], [1, 2, 4])
    assert m[0, 1] == pytest.approx(float(exact(4, 1, 2)))
    assert m[1, 2] == pytest.approx(float(exact(8, 2, 4)))
    with pytest.raises(UserError, match="k=8"):
        pass_at_k_matrix([4, 8], [1, 2], [8])
    nan = pass_at_k_matrix([4, 8], [1, 2], [8], k_above_n="nan")
    assert np.isnan(nan[0, 0]) and nan[1, 0] == 1.0
    assert mean_pass_at_k([4, 8], [1, 2], [2]) == pytest.approx((0.5 + float(exact(8, 2, 2))) / 2)
    with pytest.raises(UserError):
        pass_at_k(5, 6, 1)
    with pytest.raises(UserError):
        pass_at_k(5, 2, 6)


def test_default_ks() -> None:
    assert default_ks(1) == [1]
    assert default_ks(64) == [1, 2, 4, 8, 16, 32, 64]
    assert default_ks(100) == [1, 2, 4, 8, 16, 32, 64, 100]
    assert default_ks(3) == [1, 2, 3]
    with pytest.raises(UserError):
        default_ks(0)


def test_bootstrap_ci_contains_estimate_and_is_deterministic() -> None:
    rng = np.random.default_rng(1)
    values = rng.beta(0.5, 0.5, size=(300, 4))  # (P, K)
    lo, hi = bootstrap_ci(values, n_boot=500, seed=3)
    mean = values.mean(axis=0)
    assert ((lo < mean) & (mean < hi)).all()
    # the width of a 95% CI of a mean is about 2 * 1.96 * std / sqrt(P)
    want = 2 * 1.96 * values.std(axis=0) / np.sqrt(300)
    assert np.allclose(hi - lo, want, rtol=0.2)
    lo2, hi2 = bootstrap_ci(values, n_boot=500, seed=3)
    assert np.array_equal(lo, lo2) and np.array_equal(hi, hi2)
    a, b = bootstrap_ci(values[:, 0], n_boot=500, seed=3)
    assert (a, b) == pytest.approx((lo[0], hi[0]), rel=1e-12)  # same draws per column
    assert bootstrap_ci([0.25] * 10) == (0.25, 0.25)
