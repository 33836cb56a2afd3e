"""The trajectory measures (rlvr.experiments.trajectory_measures) against hand computations."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rlvr.errors import UserError
from rlvr.experiments.measures import MEASURES
from rlvr.experiments.verdict import verdict

RUN = {name: m.run for name, m in MEASURES.items()}


def cell(values, key="probe_entropy_after", steps=None):
    steps = steps or list(range(1, len(values) + 1))
    return {"kind": "dynamics", "series": {"step": steps, key: list(values)}}


def test_series_change_by_hand():
    # 0.30, 0.28, ..., a line falling by 0.02 a step over 20 points: every step-to-step difference is
    # -0.02, so the jitter is 0 and the interval has no width; start mean (w 5) 0.26, end mean -0.04
    line = [0.30 - 0.02 * i for i in range(20)]
    (e,), det = RUN["series_change"](lambda ev, m, s: cell(line), {"eval": "d", "model": "g", "series":
                                                                   "probe_entropy_after", "window": 5}, [0], [None])
    assert e.value == pytest.approx(np.mean(line[-5:]) - np.mean(line[:5])) and e.lo == pytest.approx(e.value)
    # alternating +-0.01 around 0.2 then 0.1: differences +-0.02 (and one step of -0.1)
    zigzag = [0.2 + 0.01 * (-1) ** i for i in range(10)] + [0.1 + 0.01 * (-1) ** i for i in range(10)]
    args = {"eval": "d", "model": "g", "series": "probe_entropy_after", "window": 10, "relative": True}
    (e,), det = RUN["series_change"](lambda ev, m, s: cell(zigzag), args, [0], [None])
    jitter = np.std(np.diff(zigzag), ddof=1) / math.sqrt(2)
    sd = math.sqrt(2 * jitter ** 2 / 10) / 0.2
    assert e.value == pytest.approx(-0.5) and (e.lo, e.hi) == pytest.approx((-0.5 - 1.96 * sd, -0.5 + 1.96 * sd))
    assert det["s0"]["jitter"] == pytest.approx(jitter)
    with pytest.raises(UserError, match="need 40"):
        RUN["series_change"](lambda ev, m, s: cell(zigzag), {**args, "window": 20}, [0], [None])
    with pytest.raises(UserError, match="no series 'entropy'"):
        RUN["series_change"](lambda ev, m, s: cell(zigzag), {**args, "series": "entropy"}, [0], [None])


def test_trajectory_gap_pairs_steps_and_reads_stability_either_way():
    # model: flat at 0.3; against: falls 0.01 a step from 0.3 (collapse); their distances from the start
    # are 0 and 0.01 t: stability gap = mean over t = 1..19 of -0.01 t = -0.10
    flat, falling = [0.3] * 20, [0.3 - 0.01 * i for i in range(20)]
    cells = {"wapo": cell(flat), "grpo": cell(falling), "rising": cell([0.3 + 0.01 * i for i in range(20)])}

    def get(ev, model, seed):
        return cells[model]

    args = {"eval": "d", "model": "wapo", "against": "grpo", "series": "probe_entropy_after", "stability": True}
    est, det = RUN["trajectory_gap"](get, args, [0, 1], [0, 1])
    assert est[0].value == pytest.approx(-0.10) and det["s0"]["steps"] == 19
    assert est[0].hi < 0 and verdict(est, "negative") == "reproduced"
    # an explosion is as far from the start as a collapse: the same gap
    (e,), _ = RUN["trajectory_gap"](get, {**args, "against": "rising"}, [0], [0])
    assert e.value == pytest.approx(-0.10)
    # without stability: the series themselves, mean of 0.01 t over t = 0..19 = 0.095
    (e,), _ = RUN["trajectory_gap"](get, {**args, "stability": False}, [0], [0])
    assert e.value == pytest.approx(0.095)
    # only common steps are paired: against logged every other step
    cells["sparse"] = cell(falling[::2], steps=list(range(1, 21, 2)))
    (e,), det = RUN["trajectory_gap"](get, {**args, "against": "sparse", "stability": False}, [0], [0])
    assert det["s0"]["steps"] == 10 and e.value == pytest.approx(np.mean([0.01 * i for i in range(0, 20, 2)]))
    # too few paired steps: not identifiable
    cells["short"] = cell(falling[:4])
    short = {**args, "against": "short"}
    est, det = RUN["trajectory_gap"](get, short, [0], [0])
    assert "fewer than 5 paired steps" in MEASURES["trajectory_gap"].why(short, est, det)
