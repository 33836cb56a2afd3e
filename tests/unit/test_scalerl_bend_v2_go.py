"""benchmarks/studies/scalerl_bend_v2_go.py, run as a user runs it on hand-made curves: scalerl_bend_v2's
go rule (both pilot curves' fits bent, neither falling more than 0.03 from its best 5 consecutive
evaluations to its last 5) against hand sums and curves whose verdict is known by construction."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.unit import go_curves

SCRIPT = go_curves.STUDIES / "scalerl_bend_v2_go.py"
STEPS = np.arange(0, 4001, 40)
C = (512 * np.maximum(STEPS, 1)).astype(float)  # the first point at one step's samples (ln C finite)


def module():
    return go_curves.load(SCRIPT)


def sigmoid(c_mid: float, A: float = 0.8, R0: float = 0.2, B: float = 1.2) -> np.ndarray:
    """R (101,) on C."""
    return go_curves.sigmoid(C, c_mid, A, R0, B)


def write(out: Path, model: str, R: np.ndarray) -> None:
    go_curves.write_curve(out, model, C, R)


def run(out: Path, *extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    return go_curves.run_script(SCRIPT, out, *extra)


def test_fall_against_hand_sums():
    go = module()
    best, last, drop = go.fall(np.array([0, 1, 2, 3, 4, 5, 4, 3, 2, 1, 0]) / 10)
    # windows of 5: .20 .30 .36 .38 .36 .30 .20
    assert (best, last, drop) == pytest.approx((0.38, 0.20, 0.18))
    assert go.fall(np.array([0.1, 0.2, 0.3, 0.4, 0.5]))[2] == pytest.approx(0.0)
    with pytest.raises(go.GoError, match="at least 5"):
        go.fall(np.array([0.1, 0.2]))


def test_bending_curves_that_stay_up_go(tmp_path):
    write(tmp_path, "pilot_ref", sigmoid(2.0e5))  # C_mid at 390 steps: the data reach 10x
    write(tmp_path, "pilot_grpo", sigmoid(1.0e5, A=0.75))
    done, report = run(tmp_path)
    assert done.returncode == 0, done.stderr
    assert report["go"] is True and "go: parts 2-10 run" in done.stdout
    ref = report["curves"]["pilot_ref"]
    assert ref["bent"] and not ref["falls"] and ref["A"] == pytest.approx(0.8, abs=0.01)
    assert report["ratio"] == pytest.approx(C[-1] / ref["C_mid"]) and report["ratio"] > 10
    assert report["below_aim"] is False


def test_a_falling_curve_stops_the_claims(tmp_path):
    R = sigmoid(1.0e5)
    R[-30:] -= np.linspace(0, 0.3, 30)  # the last 30 evaluations fall to 0.3 below
    write(tmp_path, "pilot_ref", sigmoid(2.0e5))
    write(tmp_path, "pilot_grpo", R)
    done, report = run(tmp_path)
    grpo = report["curves"]["pilot_grpo"]
    assert grpo["falls"] and grpo["drop"] > 0.2 and not grpo["passes"]
    assert report["go"] is False and "stop:" in done.stdout and "FALLS" in done.stdout


def test_a_curve_still_rising_at_the_end_stops_the_claims(tmp_path):
    write(tmp_path, "pilot_ref", sigmoid(2.0e5))
    write(tmp_path, "pilot_grpo", sigmoid(5.0e6))  # C_mid past the last point (2.05e6): an extrapolation
    done, report = run(tmp_path)
    grpo = report["curves"]["pilot_grpo"]
    assert not grpo["bent"] and not grpo["falls"] and report["go"] is False
    assert "NOT bent" in done.stdout and report["ratio"] is None and report["below_aim"] is None
    assert "length / larger C_mid: not defined" in done.stdout


def test_a_missing_pilot_curve_is_named(tmp_path):
    write(tmp_path, "pilot_ref", sigmoid(2.0e5))
    done, _ = run(tmp_path)
    assert done.returncode == 2 and "pilot_grpo" in done.stderr and "run its part first" in done.stderr


def test_another_declaration_needs_the_pilots_evaluations(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path), "--experiment", "scalerl_bend"],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "declares no evaluation 'c_pilot_grpo'" in done.stderr
    done = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path), "--experiment", "nosuch"],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "unknown experiment 'nosuch'" in done.stderr


def test_a_curve_too_short_to_judge_is_named(tmp_path):
    write(tmp_path, "pilot_ref", sigmoid(2.0e5))
    d = tmp_path / "evals" / "dynamics" / "pilot_grpo"
    d.mkdir(parents=True)
    (d / "stats.json").write_text(json.dumps({"kind": "dynamics", "series": {
        "samples": [512, 1024], "heldout_pass_rate": [0.2, 0.3]}}))
    done, _ = run(tmp_path)
    assert done.returncode == 2 and not (tmp_path / "go.json").exists()
    assert "pilot_grpo (c_pilot_grpo): only 2 held-out evaluations" in done.stderr
