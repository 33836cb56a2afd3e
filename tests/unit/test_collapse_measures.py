"""The collapse measures of issue 52 (rlvr.experiments.collapse_measures, and collapse_order's relative
threshold and interval, past_peak) against hand computations."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from rlvr.experiments import association_measures as am
from rlvr.experiments.collapse_measures import variance_share
from rlvr.experiments.measures import MEASURES
from rlvr.experiments.verdict import verdict

RUN = {name: m.run for name, m in MEASURES.items()}
WHY = {name: m.why for name, m in MEASURES.items()}


def falling(start: float, fall: int | None, steps: int = 100, auroc: float | None = None, heldout=None) -> dict:
    """A dynamics cell whose reward accuracy is ``start`` until step ``fall`` and 0 from there."""
    ra = [0.0 if fall and s >= fall else start for s in range(1, steps + 1)]
    series = {"step": list(range(1, steps + 1)), "reward_accuracy": ra,
              "proxy_truth_auroc": [auroc] * steps, "heldout_pass_rate": heldout or [None] * steps}
    return {"kind": "dynamics", "series": series}


def test_the_variance_share_by_hand():
    # rows (prior) means 20, 50, 80; columns (engineering) 40, 50, 60; grand mean 50:
    # SS_prior = 3 (900 + 0 + 900) = 5400, SS_eng = 3 (100 + 0 + 100) = 600, SS_total = 6000
    steps = np.array([[10, 20, 30], [40, 50, 60], [70, 80, 90]])
    assert variance_share(steps) == pytest.approx((5400 - 600) / 6000)
    assert variance_share(steps.T) == pytest.approx((600 - 5400) / 6000)  # engineering explains more
    assert np.isnan(variance_share(np.full((2, 2), 61.0)))  # nothing varies


def test_a_relative_threshold_is_not_met_at_the_start_and_the_interval_has_width():
    # start 0.05 (a weak checkpoint near the absolute 0.01 of the published page): absolute 0.01 with
    # window 3 needs three zeros; relative 0.5 -> 0.025 over a 10-step start
    cell = falling(0.05, 40)
    point = am.collapse_with_draws(cell, 10, 0.01, relative=0.5)
    assert point.threshold == pytest.approx(0.025) and point.start == pytest.approx(0.05)
    assert point.step == 45  # the first 10-step trailing mean below 0.025: steps 36-45 hold 4 x 0.05 = 0.02
    # a parametric bootstrap over 16 groups a step: not zero-width, and it contains the point estimate
    draws = am.collapse_with_draws(cell, 10, 0.01, relative=0.5, units=16).draws
    assert draws.size == 1000 and np.ptp(draws) > 0
    lo, hi = np.quantile(draws, [0.025, 0.975])
    assert lo <= 45 <= hi
    # reproducible run by run, seeded by the run's own series (independent batches get their own random
    # numbers), not by one seed shared by every run
    assert np.array_equal(draws, am.collapse_with_draws(cell, 10, 0.01, relative=0.5, units=16).draws)
    own = zlib.crc32(np.asarray(cell["series"]["reward_accuracy"], dtype=np.float64).tobytes())
    assert np.array_equal(draws, am.collapse_with_draws(cell, 10, 0.01, relative=0.5, units=16, seed=own).draws)
    assert not np.array_equal(draws, am.collapse_with_draws(cell, 10, 0.01, relative=0.5, units=16, seed=0).draws)


def test_collapse_order_with_units_gets_an_interval_and_without_keeps_lo_equal_hi():
    cells = {"late": falling(0.5, 60), "early": falling(0.5, 20), "flat": falling(0.0, None)}

    def get(ev, model, seed):
        return cells[model]

    args = {"eval": "d", "model": "late", "against": "early", "window": 10, "relative": 0.5}
    (old,), _ = RUN["collapse_order"](get, args, [0], [0])
    assert (old.value, old.lo, old.hi) == (40, 40, 40)  # 65 - 25: step counts, no interval
    (new,), det = RUN["collapse_order"](get, {**args, "units_per_step": 16}, [0], [0])
    assert new.value == 40 and new.lo < new.hi and new.lo <= 40 <= new.hi
    assert det["s0"]["thresholds"] == {"late": 0.25, "early": 0.25}
    _, det = RUN["collapse_order"](get, {**args, "against": "flat"}, [0], [0])
    assert "flat-s0 started at 0 reward accuracy" in WHY["collapse_order"]({**args, "against": "flat"}, [], det)


def test_collapse_variance_reads_prior_against_engineering_per_seed():
    # prior levels fall at steps 20 / 50 / 80, engineering moves them by -10 / 0 / +10 (the hand example)
    falls = {f"r{i}c{j}": 20 + 30 * i + 10 * (j - 1) for i in range(3) for j in range(3)}

    def get(ev, model, seed):
        return falling(0.5, falls[model])

    grid = [[f"r{i}c{j}" for j in range(3)] for i in range(3)]
    args = {"eval": "d", "grid": grid, "window": 1, "relative": 0.5, "units_per_step": 64}
    est, det = RUN["collapse_variance"](get, args, [0, 1], [None])
    assert est[0].value == pytest.approx(0.8) and det["s0"]["censored"] == 0
    assert est[0].lo <= 0.8 <= est[0].hi and 0 < est[0].lo  # sharp falls: the draws barely move them
    assert verdict(est, "positive") == "reproduced"
    # none collapses: no variance to share -> not identifiable
    est, det = RUN["collapse_variance"](lambda e, m, s: falling(0.5, None), args, [0], [None])
    assert "no variance" in WHY["collapse_variance"](args, est, det)
    with pytest.raises(Exception, match="rectangular"):
        MEASURES["collapse_variance"].typed({**args, "grid": [["a", "b"], ["c"]]})


def test_auroc_association_by_hand():
    # four runs: start AUROC 0.5, 0.6, 0.7, 0.8; held-out rises 0.00, 0.02, 0.04, 0.06 (one seed)
    def heldout(rise):
        return [0.2] + [0.2 + rise] * 3 + [0.2] * 96

    cells = {f"u{i}": falling(0.5, None, auroc=0.5 + 0.1 * i, heldout=heldout(0.02 * i)) for i in range(4)}
    cells["u4"] = falling(0.5, None, auroc=None, heldout=heldout(0.0))  # no mixed group: left out, said

    def get(ev, model, seed):
        return cells[model]

    args = {"eval": "d", "runs": [f"u{i}" for i in range(5)], "outcome": "rise", "window": 1}
    est, det = RUN["auroc_association"](get, args, [0], [None])
    assert est[0].value == pytest.approx(1.0) and det["units"] == 4 and det["undefined"] == ["u4 s0"]
    assert det["points"]["u2 s0"] == pytest.approx({"auroc": 0.7, "rise": 0.04})
    assert WHY["auroc_association"](args, est, det) == ""  # 5 runs: 126 distinct resamples
    few = {**args, "runs": args["runs"][:4]}
    assert "4 runs" in WHY["auroc_association"](few, est, det)


def test_past_peak_by_hand():
    up = {"kind": "dynamics", "series": {"step": [0, 10, 20, 30], "heldout_pass_rate": [0.2, 0.3, 0.4, 0.5]}}
    peaked = {"kind": "dynamics", "series": {"step": [0, 10, 20, 30], "heldout_pass_rate": [0.2, 0.3, 0.2, 0.1]}}

    def get(ev, model, seed):
        return {"sup": up, "intr": peaked}[model]

    (e,), det = RUN["past_peak"](get, {"eval": "d", "model": "sup", "against": "intr", "samples_per_point": 1000,
                                       "window": 1}, [0], [0])
    assert e.value == pytest.approx(0.5 - 0.3) and det["s0"]["peak_step"] == 10
    sd = np.sqrt(0.5 * 0.5 / 1000 + 0.3 * 0.7 / 1000)
    assert (e.lo, e.hi) == pytest.approx((0.2 - 1.96 * sd, 0.2 + 1.96 * sd))
