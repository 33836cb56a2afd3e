"""The curves section of a results page (rlvr.experiments.curve_page): each model against its reference."""

from __future__ import annotations

from types import SimpleNamespace as NS

import numpy as np

from rlvr.analysis.curves import sigmoid_curve
from rlvr.experiments import curve_measures
from rlvr.experiments.curve_page import FRACTION_CAP, _span, curve_lines, reference


def series(A, B, C_mid, seed, R0=0.2, steps=300, every=10, per_step=128):
    rng = np.random.default_rng(seed)
    step = list(range(1, steps + 1))
    samples = [s * per_step for s in step]
    held = [float(R0 if s == 1 else sigmoid_curve(c, R0, A, B, C_mid) + rng.normal(0, 0.004))
            if s == 1 or s % every == 0 else None for s, c in zip(step, samples)]
    return {"kind": "dynamics", "series": {"step": step, "samples": samples, "heldout_pass_rate": held}}


PARAMS = {"ref": (0.6, 2.0, 8000), "loss": (0.7, 2.0, 8000), "other": (0.6, 2.0, 8000),
          "short": (0.5, 2.0, 8000), "short_no": (0.5, 1.0, 8000)}


def experiment():
    claim = NS  # a claim as the spec holds it: measure and args
    return NS(
        models={"base": NS(kind="base"), **{m: NS(kind="rl") for m in PARAMS}},
        evaluations={f"c_{m}": NS(kind="dynamics", models=[m]) for m in PARAMS},
        claims=(claim(measure="curve_param_diff", args={"model": "ref", "against": "loss"}),
                claim(measure="curve_param_diff", args={"model": "other", "against": "loss"}),
                claim(measure="curve_shift_balance", args={"model": "short_no", "against": "short"}),
                claim(measure="passk_diff", args={"model": "short", "against": "loss"})))


def test_reference_is_the_claims_against_else_the_default():
    exp = experiment()
    assert reference(exp, "short_no", "ref") == "short"
    assert reference(exp, "other", "ref") == "loss"
    assert reference(exp, "short", "ref") == "ref"  # its only claim is not a curve measure
    assert reference(exp, "loss", "ref") == "ref"  # no claim on it


def test_curve_lines_compare_each_model_with_its_reference_and_plot_it_beside_it(tmp_path, monkeypatch):
    monkeypatch.setattr(curve_measures, "N_BOOT", 5)
    monkeypatch.setattr(curve_measures, "_FITS", {})
    exp = experiment()
    lines = curve_lines(exp, lambda m: [0, 1], lambda ev, m, s: series(*PARAMS[m], seed=s), tmp_path)
    rows = {ln.split("|")[1].strip(): ln.split("|")[2].strip() for ln in lines
            if ln.startswith("| ") and ln.count("|") == 6 and not ln.startswith("| model")}
    # the default reference (the first RL model declared) is not compared with anything, though one
    # of its claims names an `against`
    assert rows == {"loss": "ref", "other": "loss", "short": "ref", "short_no": "short"}
    row = next(ln for ln in lines if ln.startswith("| short_no | short |"))
    d_ln_b = float(row.split("|")[4].split()[0])
    assert abs(d_ln_b - np.log(1.0 / 2.0)) < 0.15  # B 1.0 against 2.0
    # one plot per reference: ref with loss and short, loss with other, short with short_no
    plots = [ln for ln in lines if ln.startswith("![curves")]
    assert len(plots) == 3 and sorted(p.name for p in (tmp_path / "plots").iterdir()) == [
        "curves_1.png", "curves_2.png", "curves_3.png"]


def test_a_model_whose_reference_has_not_run_is_compared_with_the_default(tmp_path, monkeypatch):
    monkeypatch.setattr(curve_measures, "N_BOOT", 5)
    monkeypatch.setattr(curve_measures, "_FITS", {})

    def load(ev, m, s):
        if m == "short":
            raise FileNotFoundError(m)
        return series(*PARAMS[m], seed=s)

    lines = curve_lines(experiment(), lambda m: [0], load, tmp_path)
    assert any(ln.startswith("| short_no | ref |") for ln in lines)


def test_a_midpoint_far_beyond_the_run_is_capped_in_the_table_not_averaged_into_digits():
    assert _span([0.35, 0.97], ".0%", FRACTION_CAP) == "66% (35%..97%)"
    # a falling curve's fit puts C_mid at 6.8e8 runs: its mean and maximum are written as the cap
    assert _span([0.35, 0.97, 6.8e8], ".0%", FRACTION_CAP) == ">1000% (35%..>1000%)"
    assert _span([20.0], ".0%", FRACTION_CAP) == ">1000%" and _span([float("nan")], ".0%", FRACTION_CAP) == "-"
    assert _span([0.5, 30.0], ".3f") == "15.250 (0.500..30.000)"  # no cap: as before
