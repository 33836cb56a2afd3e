"""`rlvr fit` and the curve readers (rlvr.commands.fit, rlvr.analysis.curve_io)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rlvr.analysis.curve_io import load_run_curve
from rlvr.analysis.curves import sigmoid_curve
from rlvr.cli import main

FLOPS_PER_STEP = 5e15
SAMPLES_PER_STEP = 768
WALL_PER_STEP = 30.0


def _fake_run(root: Path, name: str, A: float, B: float, C_mid: float, seed: int, R0: float = 0.1) -> Path:
    """A run dir whose metrics.jsonl has a held-out evaluation at step 1 and every 10 steps."""
    rng = np.random.default_rng(seed)
    run = root / name
    run.mkdir(parents=True)
    lines = []
    for step in range(1, 401):
        flops = step * FLOPS_PER_STEP
        row = {"step": step, "samples": step * SAMPLES_PER_STEP, "tokens": step * 9000, "flops": flops,
               "wall_s": step * WALL_PER_STEP, "reward": 0.3, "loss": 0.1}
        if step == 1 or step % 10 == 0:
            noise = 0.0 if step == 1 else rng.normal(0.0, 0.01)
            row["heldout_pass_rate"] = float(sigmoid_curve(flops, R0, A, B, C_mid) + noise)
        lines.append(json.dumps(row))
    (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    return run


def _fit_json(tmp_path: Path, *argv: str) -> dict:
    out = tmp_path / "fit.json"
    assert main(["fit", *argv, "--n-boot", "30", "--json", str(out)]) == 0
    return json.loads(out.read_text())


def test_fit_run_dir_json_keys_and_values(tmp_path, capsys):
    run = _fake_run(tmp_path, "cispo", A=0.6, B=1.2, C_mid=2e17, seed=0)
    res = _fit_json(tmp_path, str(run))
    assert list(res) == ["runs"] and len(res["runs"]) == 1
    r = res["runs"][0]
    assert list(r) == ["name", "A", "B", "C_mid", "R0", "rmse", "bent", "a_at_bound", "prediction"]
    assert list(r["prediction"]) == ["at", "value", "low", "high", "observed"]
    assert r["name"] == "cispo" and r["bent"] is True and r["a_at_bound"] is False
    assert abs(r["A"] - 0.6) < 0.02 and abs(r["B"] / 1.2 - 1) < 0.15
    C, R = load_run_curve(run)[1:]
    assert r["R0"] == R[0]  # fixed to the first measured point
    p = r["prediction"]
    assert p["at"] == 400 * FLOPS_PER_STEP and p["observed"] == R[-1]
    assert p["low"] < p["value"] < p["high"] and abs(p["value"] - p["observed"]) < 0.03
    out = capsys.readouterr().out
    assert "cispo" in out and "C_mid" in out and "by A" not in out


def test_compute_axes_rescale_c_mid_only(tmp_path):
    run = _fake_run(tmp_path, "r", A=0.6, B=1.2, C_mid=2e17, seed=1)
    by = {x: _fit_json(tmp_path, str(run), "--x", x)["runs"][0] for x in ("flops", "samples", "gpu_hours")}
    # samples and wall time are proportional to FLOPs here: same A and B, C_mid scaled
    assert by["samples"]["A"] == pytest.approx(by["flops"]["A"], abs=1e-6)
    assert by["samples"]["B"] == pytest.approx(by["flops"]["B"], rel=1e-5)
    assert by["samples"]["C_mid"] == pytest.approx(by["flops"]["C_mid"] * SAMPLES_PER_STEP / FLOPS_PER_STEP,
                                                   rel=1e-5)
    # no gpu_hours key in metrics.jsonl: gpu_hours = wall_s / 3600
    assert by["gpu_hours"]["C_mid"] == pytest.approx(
        by["flops"]["C_mid"] * WALL_PER_STEP / 3600 / FLOPS_PER_STEP, rel=1e-5)
    assert by["gpu_hours"]["prediction"]["at"] == pytest.approx(400 * WALL_PER_STEP / 3600)


def test_several_runs_are_ranked_by_a_and_b(tmp_path, capsys):
    lo = _fake_run(tmp_path, "low_ceiling", A=0.5, B=2.0, C_mid=1e17, seed=2)
    hi = _fake_run(tmp_path, "high_ceiling", A=0.8, B=1.0, C_mid=2e17, seed=3)
    res = _fit_json(tmp_path, str(lo), str(hi))
    assert [r["name"] for r in res["runs"]] == ["low_ceiling", "high_ceiling"]
    out = capsys.readouterr().out
    assert "by A: high_ceiling" in out and "by B: low_ceiling" in out


def test_fit_until_holds_out_and_predict_at(tmp_path):
    run = _fake_run(tmp_path, "r", A=0.6, B=1.2, C_mid=2e17, seed=4)
    res = _fit_json(tmp_path, str(run), "--fit-until", "1e18", "--predict-at", "1.5e18")["runs"][0]
    p = res["prediction"]
    truth = float(sigmoid_curve(1.5e18, 0.1, 0.6, 1.2, 2e17))
    assert p["at"] == 1.5e18 and p["observed"] is not None  # step 300 was evaluated
    assert abs(p["value"] - truth) < 0.02 and p["low"] <= truth <= p["high"]
    res = _fit_json(tmp_path, str(run), "--predict-at", "1e19")["runs"][0]
    assert res["prediction"]["observed"] is None


def test_predict_at_a_rounded_compute_finds_the_measured_point(tmp_path):
    # a real run's last compute (3.337821991680e12) is printed as 3.34e+12: copying that back into
    # --predict-at must still report the measurement there, and nothing for a compute between evals
    run = _fake_run(tmp_path, "r", A=0.6, B=1.2, C_mid=2e17, seed=4)
    C, R = load_run_curve(run)[1:]
    at = 300 * FLOPS_PER_STEP * (1 + 4e-4)  # within 0.1% of step 300, closer to it than to step 290/310
    p = _fit_json(tmp_path, str(run), "--predict-at", repr(at))["runs"][0]["prediction"]
    assert p["at"] == at and p["observed"] == R[np.argmin(np.abs(C - 300 * FLOPS_PER_STEP))]
    p = _fit_json(tmp_path, str(run), "--predict-at", repr(305 * FLOPS_PER_STEP))["runs"][0]["prediction"]
    assert p["observed"] is None  # halfway between two evaluations


def test_never_bent_run_is_flagged(tmp_path, capsys):
    run = _fake_run(tmp_path, "early", A=0.8, B=1.0, C_mid=1e20, seed=5)
    res = _fit_json(tmp_path, str(run))["runs"][0]
    assert res["bent"] is False
    assert "not bent" in capsys.readouterr().out


def test_a_bent_run_with_a_at_its_bound_is_named(tmp_path, capsys):
    at_bound = _fake_run(tmp_path, "heading_past_1", A=1.1, B=1.5, C_mid=6e17, seed=2)
    inside = _fake_run(tmp_path, "cispo", A=0.6, B=1.2, C_mid=2e17, seed=0)
    r, q = _fit_json(tmp_path, str(at_bound), str(inside))["runs"]
    assert r["bent"] is True and r["a_at_bound"] is True and r["A"] == pytest.approx(1.0)
    assert q["bent"] is True and q["a_at_bound"] is False
    out = capsys.readouterr().out
    assert "note: heading_past_1: bent, but A sits at its bound 1" in out and "note: cispo" not in out
    assert "by A: heading_past_1 (1.000, A at its bound) > cispo (0.6" in out


def test_csv_and_jsonl_files_and_plot(tmp_path):
    C = np.geomspace(1, 1e4, 25)
    R = sigmoid_curve(C, 0.2, 0.5, 1.0, 100.0) + np.random.default_rng(6).normal(0, 0.01, C.size)
    csv = tmp_path / "other_framework.csv"
    csv.write_text("compute,pass_rate\n" + "".join(f"{c},{r}\n" for c, r in zip(C, R)))
    jsonl = tmp_path / "curve.jsonl"
    jsonl.write_text("".join(json.dumps({"compute": c, "pass_rate": r}) + "\n" for c, r in zip(C, R)))
    name, C2, R2 = load_run_curve(csv)
    assert name == "other_framework"
    np.testing.assert_allclose(C2, C) and np.testing.assert_allclose(R2, R)
    png = tmp_path / "plots" / "fit.png"
    res = _fit_json(tmp_path, str(csv), str(jsonl), "--fit-until", "1000", "--plot", str(png))
    a, b = res["runs"]
    assert a["A"] == pytest.approx(b["A"], abs=1e-9) and abs(a["A"] - 0.5) < 0.02
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


BAD_FILES = {
    "empty.csv": ("compute,pass_rate\n", "no data rows"),
    "nonnumeric.csv": ("compute,pass_rate\n1,0.1\n2,abc\n3,0.3\n", "not a number"),
    "nan.csv": ("compute,pass_rate\n1,0.1\n2,nan\n3,0.3\n", "not a finite number"),
    "inf.csv": ("compute,pass_rate\n1,0.1\ninf,0.2\n", "not a finite number"),
    "decreasing.csv": ("compute,pass_rate\n1,0.1\n3,0.2\n2,0.3\n", "does not increase"),
    "repeated.csv": ("compute,pass_rate\n1,0.1\n1,0.2\n", "does not increase"),
    "columns.csv": ("flops,accuracy\n1,0.1\n", "missing column(s) compute, pass_rate"),
    "percent.csv": ("compute,pass_rate\n1,10\n2,20\n", "outside [0, 1]"),
    "badjson.jsonl": ('{"compute": 1, "pass_rate": 0.1}\n{oops\n', "not valid JSON"),
    "unknown.txt": ("1 2\n", "unsupported file type"),
}


@pytest.mark.parametrize("fname", sorted(BAD_FILES))
def test_bad_files_exit_2_with_clear_error(tmp_path, capsys, fname):
    text, expected = BAD_FILES[fname]
    path = tmp_path / fname
    path.write_text(text)
    assert main(["fit", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and expected in err and str(path) in err


def test_bad_paths_and_runs_exit_2(tmp_path, capsys):
    assert main(["fit", str(tmp_path / "missing")]) == 2
    assert "missing does not exist" in capsys.readouterr().err
    assert main(["fit", str(tmp_path)]) == 2
    assert "no metrics.jsonl" in capsys.readouterr().err
    run = tmp_path / "noeval"
    run.mkdir()
    (run / "metrics.jsonl").write_text(json.dumps({"step": 1, "flops": 1.0, "reward": 0.1}) + "\n")
    assert main(["fit", str(run)]) == 2
    assert "heldout_pass_rate" in capsys.readouterr().err
    few = tmp_path / "few.csv"
    few.write_text("compute,pass_rate\n1,0.1\n2,0.2\n3,0.3\n")
    assert main(["fit", str(few)]) == 2
    assert "need at least 4" in capsys.readouterr().err


def test_fit_shared_r0_over_runs_from_one_base(tmp_path, capsys):
    runs = [_fake_run(tmp_path, f"s{i}", A=a, B=1.2, C_mid=2e17, seed=i, R0=0.15) for i, a in enumerate((0.6, 0.7))]
    res = _fit_json(tmp_path, *map(str, runs), "--r0", "shared")
    r0s = {round(r["R0"], 6) for r in res["runs"]}
    assert len(r0s) == 1 and abs(r0s.pop() - 0.15) < 0.03
    assert [round(r["A"], 1) for r in res["runs"]] == [0.6, 0.7]
    assert "shared R0 = " in capsys.readouterr().out


def test_table_shows_full_run_names(tmp_path, capsys):
    """Run directories of one day share their first 20 characters (``quickstart-20250101-``): the
    table must show the part that tells them apart."""
    runs = [_fake_run(tmp_path, f"quickstart-20250101-{hhmmss}", A=0.6, B=1.2, C_mid=2e17, seed=i)
            for i, hhmmss in enumerate(["120301", "184512"])]
    assert main(["fit", *map(str, runs), "--n-boot", "0"]) == 0
    rows = [line.split()[0] for line in capsys.readouterr().out.splitlines()
            if line.startswith("quickstart-")]
    assert rows == ["quickstart-20250101-120301", "quickstart-20250101-184512"]


@pytest.mark.parametrize("flag", ["--predict-at", "--fit-until"])
def test_a_non_positive_compute_is_refused(tmp_path: Path, capsys, flag: str) -> None:
    """b87d620: `--predict-at -5` printed a nan prediction and exited 0."""
    f = tmp_path / "c.csv"
    f.write_text("compute,pass_rate\n" + "".join(f"{10 ** (i / 4):g},{0.1 + i / 40:.3f}\n" for i in range(20)))
    assert main(["fit", str(f), flag, "-5"]) == 2
    assert f"{flag} -5.0: compute must be a positive number" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["fit", "collapse", "report"])
def test_a_binary_input_is_one_line(tmp_path: Path, capsys, command: str) -> None:
    """b87d620: a UnicodeDecodeError traceback."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("name: x\n")
    (run / "metrics.jsonl").write_bytes(bytes(range(128, 256)) * 4)
    assert main([command, str(run)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "not UTF-8 text" in err and len(err.splitlines()) == 1
