"""rlvr.eval.crossing and the passk_crossover measure: where two mean pass@k curves cross, by hand."""

from __future__ import annotations

import numpy as np
import pytest

from rlvr.errors import UserError
from rlvr.eval.crossing import crossing_doublings, crossing_log2k
from rlvr.experiments import measures

KS = [1, 2, 4, 8]


def test_the_crossing_is_interpolated_in_log2_k():
    # d turns positive between k = 2 (-0.1) and k = 4 (+0.1): halfway in log2 k, log2 k* = 1.5
    # d first positive between k = 1 (-0.3) and k = 2 (+0.1): 0.3 / 0.4 of the way, log2 k* = 0.75
    diff = np.array([[-0.2, -0.1, 0.1, 0.3], [-0.3, 0.1, 0.2, 0.2]])
    assert crossing_log2k(KS, diff) == pytest.approx([1.5, 0.75])


def test_a_curve_above_from_the_start_crosses_at_the_smallest_k_and_one_never_above_is_censored():
    diff = np.array([[0.1, 0.2, 0.2, 0.2], [-0.2, -0.1, -0.05, 0.0]])  # d = 0 at k_max is not above
    assert crossing_log2k(KS, diff) == pytest.approx([0.0, 3.0 + 1.0])


def test_the_crossing_needs_increasing_ks_and_matching_shapes():
    with pytest.raises(UserError, match="increasing ks"):
        crossing_log2k([1, 4, 2, 8], np.zeros((1, 4)))
    with pytest.raises(UserError, match="increasing ks"):
        crossing_log2k(KS, np.zeros((1, 3)))
    with pytest.raises(UserError, match="same problems"):
        crossing_doublings(KS, np.zeros((3, 4)), np.zeros((2, 4)))


def test_doublings_inside_k_max_and_an_interval_that_holds_them():
    # every problem: the model below by 0.2 at k = 1, 2, then above by 0.2 at 4, 8 -> halfway between
    # log2 2 and log2 4, log2 k* = 1.5: 3 - 1.5 = 1.5 doublings inside k_max; identical problems: every
    # resample gives the same curves, a zero-width interval
    model = np.tile([0.3, 0.5, 0.9, 1.0], (20, 1))
    against = np.tile([0.5, 0.7, 0.7, 0.8], (20, 1))
    value, lo, hi = crossing_doublings(KS, model, against)
    assert (value, lo, hi) == pytest.approx((1.5, 1.5, 1.5))
    # 20 problems cross, 12 never do (d = -0.2 at every k): the mean d is -0.2, -0.2, +0.05, +0.05, so
    # log2 k* = 1 + 0.2 / 0.25 = 1.8 (1.2 doublings inside), and resamples with fewer crossing problems
    # meet later or never (-1): the interval widens around it
    never = np.tile([0.3, 0.5, 0.5, 0.6], (12, 1))
    mixed = crossing_doublings(KS, np.vstack([model, never]), np.vstack([against, against[:12]]))
    assert mixed[0] == pytest.approx(1.2) and mixed[1] < mixed[0] < mixed[2]


def test_the_measure_reads_the_cells_and_says_where_the_curves_cross():
    """Two problems at n = 4: the base solves p0 once in four, p1 never; RL solves p0 twice, p1 never,
    so RL leads at every k below 4 and ties at k = 4 (both cover p0): no crossing up to k_max, censored."""
    def stats(correct):
        return {"ids": ["p0", "p1"], "n": 4, "correct": correct}

    cells = {"base": stats([1, 0]), "rl": stats([2, 0]), "wide": stats([4, 4])}
    run = measures.MEASURES["passk_crossover"].run
    est, det = run(lambda e, m, s: cells[m], {"eval": "e", "model": "base", "against": "rl"}, [None], [None])
    assert est[0].value == pytest.approx(-1.0) and det["shared"]["k"] is None
    # a model above at k = 1 crosses at the smallest k: log2 4 - log2 1 = 2 doublings inside k_max
    est, det = run(lambda e, m, s: cells[m], {"eval": "e", "model": "wide", "against": "rl"}, [None], [None])
    assert est[0].value == pytest.approx(2.0) and det["shared"]["k"] == pytest.approx(1.0)
    line = measures.MEASURES["passk_crossover"].detail(det, {"model": "wide", "against": "rl"})
    assert "shared 1 [1, 1] of k_max 4" in line
    # curves that end tied on every problem (both solve p0 and not p1 at k = 4): not identifiable, not
    # "never overtakes"; curves that end apart are identifiable
    args = {"eval": "e", "model": "base", "against": "rl"}
    est, det = run(lambda e, m, s: cells[m], args, [None], [None])
    assert "solve the same problems at k = n" in measures.MEASURES["passk_crossover"].why(args, est, det)
    args = {"eval": "e", "model": "wide", "against": "rl"}
    est, det = run(lambda e, m, s: cells[m], args, [None], [None])
    assert measures.MEASURES["passk_crossover"].why(args, est, det) == ""
