"""Curve measures for the ScaleRL claims (rlvr.experiments.curve_measures) on synthetic run series."""

from __future__ import annotations

import numpy as np
import pytest

from rlvr.analysis.curves import sigmoid_curve
from rlvr.errors import UserError
from rlvr.experiments.curve_measures import curve, jitter
from rlvr.experiments.measures import MEASURES
from rlvr.experiments.verdict import Estimate, verdict

curve_prediction, curve_param_diff, curve_shift_balance, early_ranking, crossing_scan = (
    MEASURES[m].run for m in ("curve_prediction", "curve_param_diff", "curve_shift_balance", "early_ranking",
                              "crossing_scan"))
below_jitter, unbent, never_crossed, no_crossing = (
    MEASURES[m].why for m in ("curve_prediction", "curve_param_diff", "early_ranking", "crossing_scan"))


def series(A, B, C_mid, seed, R0=0.2, noise=0.004, steps=400, every=10, per_step=128):
    """A dynamics cell as a run logs it: every step, held-out pass rate every ``every`` steps."""
    rng = np.random.default_rng(seed)
    step = list(range(1, steps + 1))
    samples = [s * per_step for s in step]
    held = [None] * steps
    for i, s in enumerate(step):
        if s == 1 or s % every == 0:
            held[i] = float(R0 if s == 1 else sigmoid_curve(samples[i], R0, A, B, C_mid) + rng.normal(0, noise))
    return {"kind": "dynamics", "series": {"step": step, "samples": samples, "heldout_pass_rate": held}}


RUNS = {("fast", s): series(0.6, 3.0, 4000, s) for s in range(3)}
RUNS.update({("slow", s): series(0.8, 1.5, 16000, 10 + s) for s in range(3)})
RUNS.update({("late", s): series(0.8, 2.0, 60000, 20 + s) for s in range(3)})


def get(ev, model, seed):
    return RUNS[(model, seed)]


def test_curve_reads_the_evaluated_steps_only():
    C, R = curve(RUNS[("fast", 0)])
    assert C.size == 41 and C[0] == 128 and R[0] == 0.2
    with pytest.raises(UserError, match="dynamics"):
        curve({"kind": "samples"})


def test_prediction_within_tolerance_for_a_bent_curve_and_not_for_an_unbent_one():
    est, det = curve_prediction(get, {"eval": "d", "model": "fast", "fraction": 0.5}, [0, 1, 2], [None])
    assert verdict(est, "positive") == "reproduced", det
    assert all(abs(d["error"]) < 0.02 for d in det.values())
    est, det = curve_prediction(get, {"eval": "d", "model": "late", "fraction": 0.25}, [0, 1, 2], [None])
    assert verdict(est, "positive") != "reproduced"  # its midpoint lies beyond the fitted quarter


def test_param_diff_and_early_ranking_of_crossing_curves():
    est, det = curve_param_diff(get, {"eval": "d", "model": "slow", "against": "fast", "param": "A"},
                                [0, 1, 2], [0, 1, 2])
    assert est[0].value == pytest.approx(0.2, abs=0.03) and verdict(est, "positive") == "reproduced"
    est, det = early_ranking(get, {"eval": "d", "model": "fast", "against": "slow", "fraction": 0.1},
                             [0, 1, 2], [0, 1, 2])
    assert all(d["crossed"] and d["early_leader"] == "a" and d["final_leader"] == "b" for d in det.values())
    est, _ = early_ranking(get, {"eval": "d", "model": "fast", "against": "slow", "fraction": 0.6},
                           [0, 1, 2], [0, 1, 2])
    assert verdict(est, "positive") == "reproduced"


def test_crossing_scan_finds_the_crossing_pair_among_the_runs_on_disk():
    def get_disk(ev, model, seed):  # "gone" has not run yet
        if (model, seed) not in RUNS:
            raise FileNotFoundError(model)
        return RUNS[(model, seed)]

    args = {"eval": "d", "model": "late", "arms": ["fast", "slow", "gone"], "fraction": 0.6}
    est, det = crossing_scan(get_disk, args, [0, 1, 2], [None])
    # of the 3 pairs only fast/slow crosses (fast ahead early, slow ends 0.11 higher); at 60% the fits see it
    for d in det.values():
        assert (d["runs"], d["pairs"], len(d["crossings"])) == (3, 3, 1)
        c = d["crossings"][0]
        assert (c["early_leader"], c["final_leader"], c["ranked_right"]) == ("fast", "slow", True)
        assert c["final_gap"] == pytest.approx(0.711 - 0.6, abs=0.02)  # the curves at C = 51,200
    assert [e.value for e in est] == [1.0, 1.0, 1.0] and verdict(est, "positive") == "reproduced"
    # the same per-seed judgement as early_ranking of that pair, at any fraction
    est, _ = crossing_scan(get_disk, {**args, "fraction": 0.1}, [0, 1, 2], [None])
    pair, _ = early_ranking(get, {"eval": "d", "model": "fast", "against": "slow", "fraction": 0.1}, [0, 1, 2],
                            [0, 1, 2])
    assert [e.value for e in est] == [e.value for e in pair]
    wide = {**args, "margin": 0.5}  # both gaps must clear the margin: no crossing, so nothing to rank
    est, det = crossing_scan(get_disk, wide, [0, 1, 2], [None])
    assert est == [] and no_crossing(wide, est, det).startswith("no crossing")
    assert verdict(est, "positive", no_crossing(wide, est, det)) == "not identifiable here"
    with pytest.raises(FileNotFoundError):  # nothing to compare yet: "not run yet"
        crossing_scan(get_disk, {**args, "model": "gone", "arms": ["fast"]}, [5], [None])


def test_param_diff_with_a_tolerance_and_the_shift_balance():
    args = {"eval": "d", "model": "slow", "against": "fast", "param": "A"}
    est, _ = curve_param_diff(get, {**args, "tolerance": 0.02}, [0, 1, 2], [0, 1, 2])  # A differs by 0.2
    assert est[0].value == pytest.approx(0.02 - 0.2, abs=0.03) and verdict(est, "positive") == "not reproduced"
    est, _ = curve_param_diff(get, {**args, "model": "late", "tolerance": 0.1}, [0, 1, 2], [0, 1, 2])
    assert est[0].hi <= 0.1 and est[0].lo <= est[0].value <= est[0].hi  # late vs fast: A 0.8 vs 0.6
    est, det = curve_shift_balance(get, {"eval": "d", "model": "late", "against": "slow"}, [0, 1, 2], [0, 1, 2])
    # late vs slow: same A, B 2.0 vs 1.5 -> B moved (ln 1.33 = 0.29), the ceiling not
    assert det["d_ln_B"] == pytest.approx(np.log(2.0 / 1.5), abs=0.15) and abs(det["d_ln_gain"]) < 0.1
    assert est[0].value > 0


def test_fit_cache_returns_the_same_fit_and_forgets_the_oldest(monkeypatch):
    from rlvr.experiments import curve_measures as cm

    monkeypatch.setattr(cm, "_FITS", {})
    monkeypatch.setattr(cm, "_FITS_MAX", 2)
    monkeypatch.setattr(cm, "N_BOOT", 5)
    curves = [curve(RUNS[("fast", s)]) for s in range(3)]
    first = cm.fit_run(*curves[0], 0)
    assert cm.fit_run(*curves[0], 0) is first  # remembered
    assert cm.fit_run(*curves[0], 0, n_boot=5) is first
    assert cm.fit_run(*curves[0], 0, n_boot=4)[1].A.size <= 4  # another replicate count: fitted apart
    cm.fit_run(*curves[1], 1)
    cm.fit_run(*curves[2], 2)  # the third run pushes out the first
    assert len(cm._FITS) == 2
    assert cm.fit_run(*curves[0], 0) is not first  # fitted again
    early = cm.early_prediction(*curves[0], 0.5, 0)
    assert cm.early_prediction(*curves[0], 0.5, 0) is early and cm.early_prediction(*curves[0], 0.75, 0) is not early


def test_a_parameter_comparison_is_not_identifiable_unless_every_fit_has_bent():
    """A read off a curve that has not bent is an extrapolation (often A at its bound): the claim is
    not identifiable here, saying why, however narrow the bootstrap interval."""
    args = {"eval": "d", "model": "slow", "against": "fast", "param": "A"}
    est, det = curve_param_diff(get, args, [0, 1, 2], [0, 1, 2])
    assert unbent(args, est, det) == "" and verdict(est, "positive", unbent(args, est, det)) == "reproduced"
    short = {(m, s): {"kind": "dynamics", "series": {k: v[:150] for k, v in r["series"].items()}}
             for (m, s), r in RUNS.items()}  # 150 of 400 steps: slow's midpoint (step 125) barely inside
    est, det = curve_param_diff(lambda e, m, s: short[(m, s)], {**args, "model": "late"}, [0, 1, 2], [0, 1, 2])
    assert det["bent"]["late"] == [False, False, False] and all(det["bent"]["fast"])
    why = unbent({**args, "model": "late"}, est, det)
    assert why.startswith("not every fit has bent (late 0 of 3, fast 3 of 3)")
    assert verdict(est, "positive", why) == "not identifiable here"
    balance = {"eval": "d", "model": "late", "against": "fast"}
    est, det = curve_shift_balance(lambda e, m, s: short[(m, s)], balance, [0, 1, 2], [0, 1, 2])
    assert "late 0 of 3" in MEASURES["curve_shift_balance"].why(balance, est, det)


def test_an_unidentified_quantity_is_not_identifiable_whatever_its_interval():
    above = [Estimate(s, 0.3, 0.2, 0.4) for s in range(3)]
    assert verdict(above, "positive") == "reproduced" and verdict(above, "negative") == "not reproduced"
    assert verdict(above, "positive", "A not identified") == verdict(above, "negative", "x") == "not identifiable here"


def test_a_ranking_of_runs_that_never_crossed_is_not_identifiable():
    """A degenerate ranking: the early leader also ends ahead in every seed, so early fits that follow
    the lead are right whatever they are worth: +1 in every seed, yet not identifiable."""
    args = {"eval": "d", "model": "late", "against": "slow", "fraction": 0.25}
    est, det = early_ranking(get, args, [0, 1, 2], [0, 1, 2])
    assert all(not x["crossed"] for x in det.values())
    why = never_crossed(args, est, det)
    assert "did not cross in s0, s1, s2 of 3" in why and verdict(est, "positive", why) == "not identifiable here"


def test_a_prediction_tolerance_below_the_evaluations_jitter_is_not_identifiable():
    rng = np.random.default_rng(0)
    quiet = np.linspace(0.2, 0.6, 400)
    noisy = quiet + rng.normal(0, 0.04, 400)
    assert jitter(quiet) == pytest.approx(0, abs=1e-9) and jitter(noisy) == pytest.approx(0.04, rel=0.15)
    details = {"s0": {"jitter": jitter(noisy)}, "s1": {"jitter": 0.05}}
    args = {"eval": "d", "model": "m", "fraction": 0.5}  # the default tolerance: 2 points
    assert "below one evaluation's own jitter" in below_jitter(args, [], details)
    assert below_jitter({**args, "tolerance": 0.1}, [], details) == ""


def test_prediction_window_targets_the_mean_of_the_last_evaluations():
    spiked = {s: series(0.6, 3.0, 4000, s) for s in range(3)}
    for run in spiked.values():  # the last evaluation 10 points above the curve: one noisy point
        run["series"]["heldout_pass_rate"][-1] += 0.10

    def get_spiked(ev, model, seed):
        return spiked[seed]

    args = {"eval": "d", "model": "fast", "fraction": 0.5, "tolerance": 0.03}
    est, det = curve_prediction(get_spiked, args, [0, 1, 2], [None])
    assert verdict(est, "positive") == "not reproduced"  # the single last point misses by ~10 points
    est, det = curve_prediction(get_spiked, {**args, "window": 5}, [0, 1, 2], [None])
    assert verdict(est, "positive") == "reproduced", det  # the mean of 5 carries a fifth of the spike
    _, R = curve(spiked[0])
    assert det["s0"]["observed"] == pytest.approx(R[-5:].mean())
    assert det["s0"]["error"] == pytest.approx(-0.02, abs=0.01)
    with pytest.raises(Exception, match="window"):
        MEASURES["curve_prediction"].typed({**args, "window": 0})


def test_the_jitter_of_a_windowed_target_shrinks_by_sqrt_window():
    noisy = {s: series(0.6, 3.0, 4000, s, noise=0.05) for s in range(3)}

    def get_noisy(ev, model, seed):
        return noisy[seed]

    args = {"eval": "d", "model": "fast", "fraction": 0.5, "tolerance": 0.03, "x": "samples"}
    _, one = curve_prediction(get_noisy, {**args, "window": 1}, [0, 1, 2], [None])
    _, five = curve_prediction(get_noisy, {**args, "window": 5}, [0, 1, 2], [None])
    assert five["s0"]["jitter"] == pytest.approx(one["s0"]["jitter"] / np.sqrt(5))
    assert "below one evaluation's own jitter" in below_jitter({**args, "window": 1}, [], one)
    assert below_jitter({**args, "window": 5}, [], five) == ""


def test_the_page_details_of_a_curve_claim_name_each_pretraining_seeds_copies():
    from rlvr.experiments import spec
    from rlvr.experiments.claims import judge_all
    from rlvr.experiments.page import detail_lines

    exp = spec.parse({"name": "x", "title": "t", "seeds": 2, "pretrain_seeds": 2,
                      "models": {"base": {"kind": "base", "pretrain_seeded": True},
                                 "fast": {"kind": "rl", "seeded": True}, "slow": {"kind": "rl", "seeded": True}},
                      "evaluations": {"d": {"kind": "dynamics", "temperature": 1.0, "n": 1, "problems": 1,
                                            "models": ["fast", "slow"]}},
                      "claims": [{"id": "c", "claim": "c", "paper": "p", "measure": "curve_param_diff",
                                  "args": {"eval": "d", "model": "slow", "against": "fast", "param": "A"},
                                  "expect": "positive"}]}, "x")

    def cell(ev, model, seed):  # the copies NAME@p1 read the same synthetic runs
        return RUNS[(model.split("@")[0], seed)]

    [row] = judge_all(exp, cell, lambda m: [0, 1])
    [line] = detail_lines([row])  # each pretraining seed's details are keyed by its own copies' names
    assert "p0: slow" in line and "p1: slow@p1" in line and "fast@p1 bent in" in line
