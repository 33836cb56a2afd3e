"""Association measures (rlvr.experiments.association_measures) against hand computations."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rlvr.errors import UserError
from rlvr.experiments import association_measures as am
from rlvr.experiments.measures import MEASURES

RUN = {name: m.run for name, m in MEASURES.items()}


def cell(correct, n=4):
    return {"n": n, "correct": list(correct), "ids": [f"p{i}" for i in range(len(correct))]}


# three checkpoints: base pass@1 0.25, 0.5, 0.75 (2 problems, n = 4); RL gains 0.0/0.125 (early),
# 0.25/0.25 (mid), 0.25/0.375 (late) over the two seeds
CELLS = {("e", "b1", None): cell([1, 1]), ("e", "b2", None): cell([2, 2]), ("e", "b3", None): cell([3, 3]),
         ("e", "r1", 0): cell([1, 1]), ("e", "r1", 1): cell([2, 1]),
         ("e", "r2", 0): cell([3, 3]), ("e", "r2", 1): cell([3, 3]),
         ("e", "r3", 0): cell([4, 4]), ("e", "r3", 1): cell([4, 4])}
PAIRS = [["r1", "b1"], ["r2", "b2"], ["r3", "b3"]]


def get(ev, model, seed):
    if ev == "d":
        steps = list(range(1, 11))
        fall = {"i1": 3, "i2": 6, "i3": None}[model]  # reward accuracy drops to 0 at this step
        acc = [0.0 if fall and s >= fall else 0.5 for s in steps]
        return {"kind": "dynamics", "series": {"step": steps, "reward_accuracy": acc}}
    return CELLS[(ev, model, seed)]


def test_pass_at_k_of_a_cell_and_the_gain_association_by_hand():
    assert am.passk(cell([1, 3]), 1) == pytest.approx((0.25 + 0.75) / 2)
    assert am.passk(cell([1, 0]), 2) == pytest.approx((1 - 3 / 6) / 2)  # 1 - C(3,2)/C(4,2) for the first
    with pytest.raises(UserError, match="outside"):
        am.passk(cell([1]), 8)
    est, det = RUN["gain_association"](get, {"eval": "e", "pairs": PAIRS}, [0, 1], [None])
    x = [0.25, 0.25, 0.5, 0.5, 0.75, 0.75]
    y = [0.0, 0.125, 0.25, 0.25, 0.25, 0.25]
    assert est[0].value == pytest.approx(np.corrcoef(x, y)[0, 1]) and det["units"] == 6
    assert est[0].lo <= est[0].value <= est[0].hi and det["points"]["r1 s1"] == pytest.approx({"x": 0.25, "y": 0.125})


def test_collapse_association_counts_a_run_that_never_collapsed_at_its_end():
    pairs = [["i1", "r1", "b1"], ["i2", "r2", "b2"], ["i3", "r3", "b3"]]
    est, det = RUN["collapse_association"](get, {"eval": "e", "dynamics": "d", "pairs": pairs, "window": 1},
                                       [0, 1], [None])
    # collapse steps 3, 6 and never (-> 11); gains as above
    x = [3, 3, 6, 6, 11, 11]
    y = [0.0, 0.125, 0.25, 0.25, 0.25, 0.25]
    assert est[0].value == pytest.approx(np.corrcoef(x, y)[0, 1]) and det["censored"] == 2
    assert det["points"]["i1 s0"]["collapse_step"] == 3 and not det["points"]["i3 s1"]["collapsed"]
    with pytest.raises(UserError, match="dynamics"):
        am.collapse_step_of({"kind": "samples"}, 3, 0.01)


def series(held, reward_acc=None):
    steps = list(range(1, len(held) + 1))
    return {"kind": "dynamics", "series": {"step": steps, "heldout_pass_rate": held,
                                           "reward_accuracy": reward_acc or [0.5] * len(held)}}


def test_rise_and_fall_heldout_change_and_collapse_order_by_hand():

    runs = {("up_down", 0): series([0.2, 0.3, 0.4, 0.4, 0.3, 0.1, 0.1]),
            ("flat", 0): series([0.2, 0.2, 0.2, 0.2, 0.2, 0.2]),
            ("early", 0): series([0.2] * 6, [0.5, 0.0, 0.0, 0.0, 0.0, 0.0]),
            ("never", 0): series([0.2] * 6)}
    get = lambda e, m, s: runs[(m, s)]  # noqa: E731
    est, det = RUN["rise_and_fall"](get, {"eval": "d", "model": "up_down", "samples_per_point": 1024}, [0], [None])
    # smoothed (w 3): .2, .25, .3, .3667, .3667, .2667, .1667 -> peak .3667 at step 4, last .1667
    assert det["s0"]["peak"] == pytest.approx(0.36667, abs=1e-4) and det["s0"]["peak_step"] == 4
    assert est[0].value == pytest.approx(min(0.36667 - 0.2, 0.36667 - 0.16667), abs=1e-4) and est[0].lo > 0
    est, _ = RUN["rise_and_fall"](get, {"eval": "d", "model": "flat", "samples_per_point": 1024}, [0], [None])
    assert est[0].value == pytest.approx(0.0) and est[0].lo < 0 < est[0].hi
    # falling from the start: smoothed .3, .25, .2, .1167; the peak after the start is .25 (step 2), so
    # the rise is -0.05 and the claim can be refuted (sd: the peak averages 2 points, the first is 1)
    runs[("down", 0)] = series([0.3, 0.2, 0.1, 0.05])
    est, det = RUN["rise_and_fall"](get, {"eval": "d", "model": "down", "samples_per_point": 1024}, [0], [None])
    sd = math.sqrt(0.25 * 0.75 / (1024 * 2) + 0.3 * 0.7 / 1024)
    assert det["s0"]["peak_step"] == 2 and est[0].value == pytest.approx(-0.05)
    assert est[0].hi == pytest.approx(-0.05 + 1.96 * sd) and est[0].hi < 0
    est, det = RUN["heldout_change"](get, {"eval": "d", "model": "up_down", "samples_per_point": 1024}, [0], [None])
    assert est[0].value == pytest.approx(0.5 / 3 - 0.2) and det["s0"]["end_steps"] == [5, 6, 7]
    sd = math.sqrt((0.5 / 3) * (1 - 0.5 / 3) / (1024 * 3) + 0.2 * 0.8 / 1024)
    assert est[0].hi - est[0].value == pytest.approx(1.96 * sd)
    est, det = RUN["collapse_order"](get, {"eval": "d", "model": "never", "against": "early", "window": 1}, [0], [0])
    assert est[0].value == 7 - 2 and not det["s0"]["model_collapsed"] and det["s0"]["against_collapsed"]
    assert det["s0"]["start_reward_accuracy"] == {"never": 0.5, "early": 0.1}


def test_the_permutation_test_over_checkpoints_is_exact():
    from rlvr.experiments.association_measures import permutation_p

    groups = [0, 0, 1, 1, 2, 2]
    x = [0.1, 0.1, 0.2, 0.2, 0.3, 0.3]
    y = [0.0, 0.01, 0.1, 0.11, 0.2, 0.21]  # the only ordering of 3 checkpoints as extreme: 1 of 3! = 6
    assert permutation_p(x, y, groups) == pytest.approx(1 / 6)
    five = [g for g in range(5) for _ in range(3)]
    xs = [0.1 * g for g in five]
    assert permutation_p(xs, [v + 0.001 * i for i, v in enumerate(xs)], five) == pytest.approx(1 / 120)
