"""benchmarks/studies/scalerl_bend_v4_go.py, run as a user runs it on hand-made curves and logs:
scalerl_bend_v4's go rule (bent, no fall at the end, no dip after the best, the pool holds) against hand
sums and curves whose verdict is known by construction, including the dip-and-recover curve that passed
scalerl_bend_v3's rule."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.unit import go_curves

SCRIPT = go_curves.STUDIES / "scalerl_bend_v4_go.py"
STEPS = np.arange(0, 641, 10)
C = (512 * np.maximum(STEPS, 1)).astype(float)  # the first point at one step's samples (ln C finite)


def module():
    return go_curves.load(SCRIPT)


def sigmoid(c_mid: float, A: float = 0.9, R0: float = 0.25, B: float = 1.5) -> np.ndarray:
    """R (65,) on C."""
    return go_curves.sigmoid(C, c_mid, A, R0, B)


def write(out: Path, model: str, R: np.ndarray, retired: int | None = 20_000) -> None:
    """The curve, and (unless retired is None) a metrics log whose last retired count is `retired`."""
    go_curves.write_curve(out, model, C, R)
    if retired is not None:
        run = out / "models" / model / "run"
        run.mkdir(parents=True)
        rows = [{"step": 1, "reward": 0.3, "retired_prompts": 0}, {"step": 639, "retired_prompts": retired - 5},
                {"step": 640, "heldout_pass_rate": float(R[-1])}, {"step": 640, "retired_prompts": retired}]
        (run / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")


def run(out: Path, *extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    return go_curves.run_script(SCRIPT, out, *extra)


def test_dip_against_hand_sums():
    go = module()
    peak, depth = go.dip(np.array([0, 1, 2, 3, 4, 5, 4, 3, 2, 1, 0]) / 10)
    # windows of 5: .20 .30 .36 .38 .36 .30 .20: the peak .38, the lowest after it .20
    assert (peak, depth) == pytest.approx((0.38, 0.18))
    assert go.dip(np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6]))[1] == pytest.approx(0.0)  # still rising
    # v3's pilot shape: up, down by 0.3, back up above the earlier level: the end test (b) sees
    # nothing, and neither would a dip measured from the overall best (it comes after the dip)
    R = np.array([0.5] * 10 + [0.2] * 5 + [0.6] * 10)
    assert go.dip(R) == pytest.approx((0.5, 0.3))
    assert sys.modules["scalerl_bend_v2_go"].fall(R)[2] == pytest.approx(0.0)  # v3's rule: no fall
    with pytest.raises(go.GoError, match="at least 5"):
        go.dip(np.array([0.1, 0.2]))


def test_the_pool_test_reads_the_last_retired_count(tmp_path):
    go = module()
    write(tmp_path, "m", sigmoid(2.0e4), retired=31_000)
    assert go.retired_at_end(tmp_path / "models" / "m" / "run") == (640, 31_000)
    p = go.premises(sigmoid(2.0e4), 31_000)
    assert p["drained"] and p["retired_frac"] == pytest.approx(31_000 / 34_000)  # above 90% (30,600)
    assert not go.premises(sigmoid(2.0e4), 30_600)["drained"]  # at the limit: holds
    with pytest.raises(go.GoError, match="no metrics log"):
        go.retired_at_end(tmp_path / "nowhere")
    (tmp_path / "bare").mkdir()
    (tmp_path / "bare" / "metrics.jsonl").write_text('{"step": 1, "reward": 0.5}\n')
    with pytest.raises(go.GoError, match="no retired_prompts"):
        go.retired_at_end(tmp_path / "bare")


def test_bending_curves_that_stay_up_on_a_pool_that_holds_go(tmp_path):
    write(tmp_path, "pilot_ref", sigmoid(2.0e4))  # C_mid at 39 steps: the run is 16x it
    write(tmp_path, "pilot_grpo", sigmoid(2.5e4, A=0.85))
    done, report = run(tmp_path)
    assert done.returncode == 0, done.stderr
    assert report["go"] is True and "go: parts 2-6 run" in done.stdout
    for c in report["curves"].values():
        assert c["bent"] and not c["falls"] and not c["dips"] and not c["drained"] and not c["A_at_bound"]
    assert report["ratio"] == pytest.approx(C[-1] / report["curves"]["pilot_grpo"]["C_mid"])
    assert report["below_aim"] is False


def test_a_dip_that_recovers_stops_it(tmp_path):
    R = sigmoid(2.0e4)
    R[40:46] -= 0.2  # steps 400-450 fall by 0.2, then the curve is back and still rising: v3's pilot in small
    write(tmp_path, "pilot_ref", R)
    write(tmp_path, "pilot_grpo", sigmoid(2.5e4))
    done, report = run(tmp_path)
    ref = report["curves"]["pilot_ref"]
    assert not ref["falls"] and ref["dips"] and ref["dip"] > 0.1  # the end test alone would have said go
    assert report["go"] is False and "DIPS" in done.stdout and "stop:" in done.stdout


def test_a_drained_pool_stops_it(tmp_path):
    write(tmp_path, "pilot_ref", sigmoid(2.0e4), retired=33_000)
    write(tmp_path, "pilot_grpo", sigmoid(2.5e4))
    done, report = run(tmp_path)
    assert report["go"] is False and report["curves"]["pilot_ref"]["drained"] and "DRAINED" in done.stdout


def test_a_missing_log_or_curve_is_an_error_naming_it(tmp_path):
    write(tmp_path, "pilot_ref", sigmoid(2.0e4), retired=None)
    write(tmp_path, "pilot_grpo", sigmoid(2.5e4))
    done, _ = run(tmp_path)
    assert done.returncode == 2 and "no metrics log" in done.stderr and "pilot_ref" in done.stderr
    assert not (tmp_path / "go.json").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    done, _ = run(empty)
    assert done.returncode == 2 and "pilot_ref" in done.stderr


def test_claim_runs_report_each_runs_premises_and_the_runs_not_run(tmp_path):
    write(tmp_path, "scalerl-s3", sigmoid(2.0e4))
    bad = sigmoid(2.0e4)
    bad[50:] -= 0.3  # falls for good
    write(tmp_path, "dapo@p1-s3", bad, retired=32_000)
    done, runs = run(tmp_path, "--claim-runs")
    assert done.returncode == 0, done.stderr
    assert len(runs) == 18  # 3 arms x RL seeds 3-5 x pretraining seeds 0-1
    assert runs["scalerl-s3"]["dips"] is False and runs["scalerl-s3"]["drained"] is False
    assert runs["dapo@p1-s3"]["dips"] and runs["dapo@p1-s3"]["drained"]
    assert "missing" in runs["grpo-s5"]
    assert "2 of 18 claim runs finished; 1 fail a premise" in done.stdout and "DIPS, DRAINED" in done.stdout
