"""The exploratory ScaleRL measures (rlvr.experiments.final_measures) and the pure maths under them
(rlvr.analysis.extrapolation), each against a hand computation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rlvr.analysis.curves import sigmoid_curve
from rlvr.analysis.extrapolation import (
    early_fit_final,
    early_mean,
    extrapolation_error,
    final_mean,
    log_linear_fit,
    power_law_fit,
    spearman,
)
from rlvr.errors import UserError
from rlvr.experiments.final_measures import rank_gain
from rlvr.experiments.measures import MEASURES
from rlvr.experiments.page import claim_tables, count_line
from rlvr.experiments.verdict import verdict


def test_spearman_by_hand():
    # ranks differ by 0, 1, 1, 0: 1 - 6 * 2 / (4 * 15) = 0.8
    assert spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    # a tie takes its average rank: x ranks (1.5, 1.5, 3), y (1, 2, 3): 1.5 / sqrt(1.5 * 2)
    assert spearman([1, 1, 2], [1, 2, 3]) == pytest.approx(1.5 / math.sqrt(3.0))
    assert spearman([4, 3, 2, 1], [1, 2, 3, 4]) == pytest.approx(-1.0)
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3]))


def test_power_law_and_log_linear_fits_recover_exact_curves():
    a, b = power_law_fit([1.0, 2.0, 4.0], [0.1, 0.2, 0.4])  # R = 0.1 C
    assert (a, b) == (pytest.approx(0.1), pytest.approx(1.0))
    alpha, beta = log_linear_fit([1.0, math.e, math.e ** 2], [0.1, 0.3, 0.5])  # R = 0.1 + 0.2 ln C
    assert (alpha, beta) == (pytest.approx(0.1), pytest.approx(0.2))
    with pytest.raises(UserError, match="> 0"):
        power_law_fit([1.0, 2.0], [0.0, 0.2])


def test_extrapolation_error_is_the_mean_absolute_miss_after_the_fitted_part():
    C = np.exp(np.arange(8.0))  # the first 4 points (C <= e^3 = 20.1) lie within 3% of e^7 = 1097
    line = 0.1 + 0.05 * np.log(C)
    missed = line + np.array([0, 0, 0, 0, 0.1, -0.1, 0.1, 0.3])  # the later points off the line
    assert extrapolation_error("log_linear", C, missed, 0.03) == pytest.approx((0.1 + 0.1 + 0.1 + 0.3) / 4)
    power = 0.02 * C ** 0.5
    assert extrapolation_error("power_law", C, power + np.array([0, 0, 0, 0, 0.05, 0.05, -0.05, 0.05]),
                               0.03) == pytest.approx(0.05)
    with pytest.raises(UserError, match="at least 4 points"):
        extrapolation_error("log_linear", C, line, 0.005)
    with pytest.raises(UserError, match="unknown curve form"):
        extrapolation_error("cubic", C, line, 0.03)


def test_early_and_final_means_by_hand():
    C, R = [10.0, 20.0, 30.0, 40.0], [0.1, 0.2, 0.3, 0.9]
    assert early_mean(C, R, 0.5) == pytest.approx(0.2)  # C <= 20, from the second point: 0.2 alone
    assert final_mean(R) == pytest.approx((0.2 + 0.3 + 0.9) / 3)
    assert final_mean(R, 2) == pytest.approx(0.6)


def test_rank_gain_is_the_fits_spearman_minus_the_early_means():
    finals = np.array([0.1, 0.2, 0.3, 0.4])
    rows = np.stack([finals, finals[::-1], finals], axis=1)  # fits rank right, early means reversed
    assert rank_gain(rows) == pytest.approx(2.0)
    rows = np.stack([[1, 3, 2, 4], finals, finals], axis=1)  # 0.8 against 1.0
    assert rank_gain(rows) == pytest.approx(-0.2)


def dynamics(R, per_point=100.0):
    """A dynamics cell with one held-out evaluation per logged step, C = 100, 200, ..."""
    n = len(R)
    return {"kind": "dynamics", "series": {"step": list(range(1, n + 1)),
                                           "samples": [per_point * (i + 1) for i in range(n)],
                                           "heldout_pass_rate": list(R)}}


def test_final_diff_pairs_seeds_and_takes_its_interval_from_each_runs_jitter():
    runs = {("m", 0): dynamics([0.1, 0.2, 0.3, 0.4, 0.5, 0.6]),  # steady steps of 0.1: no jitter
            ("a", 0): dynamics([0.1, 0.2, 0.1, 0.2, 0.1, 0.2]),  # jitter^2 = var(+-0.1 steps) / 2 = 0.006
            ("m", 1): dynamics([0.2] * 6), ("a", 1): dynamics([0.5] * 6)}
    measure = MEASURES["final_diff"]
    args = {"eval": "e", "model": "m", "against": "a"}
    est, details = measure.run(lambda e, m, s: runs[(m, s)], args, [0, 1], [0, 1])
    sd = math.sqrt(0.006 / 3)
    assert est[0].value == pytest.approx(0.5 - (0.2 + 0.1 + 0.2) / 3)
    assert (est[0].lo, est[0].hi) == (pytest.approx(est[0].value - 1.96 * sd), pytest.approx(est[0].value + 1.96 * sd))
    assert est[1].value == pytest.approx(-0.3) and details["s1"]["sd"] == 0
    assert measure.why(args, est, details) == ""
    assert verdict(est, "positive") == "inconclusive"  # the seeds disagree
    runs[("a", 1)] = dynamics([0.5] * 6, per_point=150.0)  # ends at 900 samples, not 600
    _, details = measure.run(lambda e, m, s: runs[(m, s)], args, [0, 1], [0, 1])
    assert "end at different compute (samples) in s1 (600 vs 900)" in measure.why(args, est, details)


def test_a_final_diff_claim_can_read_not_reproduced():
    runs = {("m", s): dynamics([0.3] * 6) for s in (0, 1, 2)} | {("a", s): dynamics([0.5] * 6) for s in (0, 1, 2)}
    est, _ = MEASURES["final_diff"].run(lambda e, m, s: runs[(m, s)], {"eval": "e", "model": "m", "against": "a"},
                                        [0, 1, 2], [0, 1, 2])
    assert verdict(est, "positive") == "not reproduced"


def saturating(A, C_mid, seed, n=40):
    rng = np.random.default_rng(seed)
    C = 1000.0 * np.arange(1, n + 1)
    return dynamics(sigmoid_curve(C, 0.2, A, 3.0, C_mid) + rng.normal(0, 0.003, n), per_point=1000.0)


def test_form_extrapolation_is_the_mean_over_runs_of_each_runs_error_gap():
    runs = {(m, 0): saturating(A, c, i) for i, (m, A, c) in enumerate((("x", 0.6, 6000.0), ("y", 0.7, 8000.0),
                                                                        ("z", 0.5, 5000.0)))}
    args = {"eval": "e", "model": "x", "arms": ["y", "z"], "form": "log_linear", "fraction": 0.5}
    est, details = MEASURES["form_extrapolation"].run(lambda e, m, s: runs[(m, s)], args, [0], [None])
    gaps = []
    for m in ("x", "y", "z"):
        C, R = (np.asarray(runs[(m, 0)]["series"][k]) for k in ("samples", "heldout_pass_rate"))
        gaps.append(extrapolation_error("log_linear", C, R, 0.5) - extrapolation_error("sigmoid", C, R, 0.5))
    assert est[0].value == pytest.approx(np.mean(gaps))
    assert est[0].lo <= est[0].value <= est[0].hi and details["s0"]["runs"] == 3
    # saturating curves: a line in log compute overshoots what a bounded sigmoid sees coming
    assert est[0].lo > 0 and details["s0"]["sigmoid_better"] == 3


def test_early_rank_gain_compares_the_two_rankings_on_the_same_runs():
    runs = {(m, 0): saturating(A, c, i) for i, (m, A, c) in enumerate((("x", 0.6, 6000.0), ("y", 0.7, 9000.0),
                                                                        ("z", 0.5, 4000.0), ("w", 0.8, 12000.0)))}
    args = {"eval": "e", "model": "x", "arms": ["y", "z", "w"], "fraction": 0.25}
    est, details = MEASURES["early_rank_gain"].run(lambda e, m, s: runs[(m, s)], args, [0], [None])
    rows = []
    for m in ("x", "y", "z", "w"):
        C, R = (np.asarray(runs[(m, 0)]["series"][k]) for k in ("samples", "heldout_pass_rate"))
        rows.append([early_fit_final(C, R, 0.25), early_mean(C, R, 0.25), final_mean(R)])
    assert est[0].value == pytest.approx(rank_gain(np.array(rows)))
    assert details["s0"]["fit_spearman"] - details["s0"]["naive_spearman"] == pytest.approx(est[0].value)


def test_the_measures_arguments_are_checked_by_the_strict_loader():
    with pytest.raises(Exception, match="form"):
        MEASURES["form_extrapolation"].typed({"eval": "e", "model": "x", "arms": ["y"], "form": "cubic"})
    with pytest.raises(Exception, match="windw"):
        MEASURES["final_diff"].typed({"eval": "e", "model": "x", "against": "y", "windw": 2})


def test_exploratory_claims_get_their_own_table_and_count_with_the_post_hoc_ones():
    row = {"id": "c", "claim": "c", "paper": "p", "quantity": "q", "expect": "positive", "verdict": "reproduced",
           "estimates": [], "spread": {"seeds": 0}, "kind": "exploratory", "post_hoc": "declared exploratory"}
    finding = {**row, "id": "f", "claim": "f", "kind": "finding", "post_hoc": ""}
    text = "\n".join(claim_tables([finding, row]))
    assert text.index("Exploratory:") < text.index("| c <br>")
    assert "post hoc (declared after their cells, not counted): 1 reproduced" in count_line([finding, row])
    assert count_line([finding, row]).startswith("Findings: 1 reproduced;")
