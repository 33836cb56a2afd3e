"""benchmarks/studies/scalerl_bend_pick.py, run as a user runs it on hand-made curves: scalerl_bend's
pilot rule (lead over the first 25% of compute, end lower over the last 5 evaluations, both gaps above
twice the recipe's seed sd; the larger smaller gap; none: no crossing arm) against hand sums."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "studies" / "scalerl_bend_pick.py"
C = [512 * k for k in range(20)]  # 25% of the last (9,728): points 0-4, the first excluded -> 1-4


def series(first: float, early: float, final: float) -> list[float]:
    """R (20,): the first point, 4 early points at ``early``, 10 in between, the last 5 at ``final``."""
    return [first, *[early] * 4, *[(early + final) / 2] * 10, *[final] * 5]


def write(out: Path, model: str, R: list[float]) -> None:
    d = out / "evals" / "dynamics" / model
    d.mkdir(parents=True)
    (d / "stats.json").write_text(json.dumps({"kind": "dynamics", "series": {"samples": C, "heldout_pass_rate": R}}))


def cells(out: Path, lr3e4: tuple[float, float], lr1e3: tuple[float, float]) -> None:
    write(out, "pilot_ref", series(0.2, 0.30, 0.60))
    for s, (e, f) in enumerate([(0.30, 0.60), (0.31, 0.62), (0.32, 0.64)]):  # sd 0.01 early, 0.02 final
        write(out, f"scalerl-s{s}", series(0.2, e, f))
    write(out, "pilot_lr3e4", series(0.2, *lr3e4))
    write(out, "pilot_lr1e3", series(0.2, *lr1e3))


def run(out: Path) -> tuple[subprocess.CompletedProcess, dict]:
    done = subprocess.run([sys.executable, str(SCRIPT), str(out), "--json", str(out / "pick.json")],
                          capture_output=True, text=True)
    return done, (json.loads((out / "pick.json").read_text()) if done.returncode == 0 else {})


def test_the_candidate_that_crosses_beyond_twice_the_seed_sd_is_picked(tmp_path: Path) -> None:
    cells(tmp_path, (0.40, 0.50), (0.45, 0.57))  # lr1e3 ends only 0.03 lower: below 2 sd = 0.04
    done, report = run(tmp_path)
    assert done.returncode == 0, done.stderr
    assert report["sd_early"] == pytest.approx(0.01) and report["sd_final"] == pytest.approx(0.02)
    a, b = report["candidates"]
    assert (a["name"], a["early_gap"], a["final_gap"], a["crosses"]) == ("lr3e4", pytest.approx(0.10),
                                                                        pytest.approx(0.10), True)
    assert b["early_gap"] == pytest.approx(0.15) and b["final_gap"] == pytest.approx(0.03) and not b["crosses"]
    assert report["pick"] == "lr3e4" and report["parts"] == "12-14" and "train parts 12-14" in done.stdout


def test_of_two_that_cross_the_larger_smaller_gap_wins(tmp_path: Path) -> None:
    cells(tmp_path, (0.40, 0.50), (0.45, 0.45))  # smaller gaps 0.10 and 0.15
    assert run(tmp_path)[1]["pick"] == "lr1e3"


def test_an_early_lead_within_twice_the_sd_is_no_crossing(tmp_path: Path) -> None:
    cells(tmp_path, (0.315, 0.40), (0.20, 0.30))  # lr3e4 leads by 0.015 < 0.02; lr1e3 trails early
    done, report = run(tmp_path)
    assert report["pick"] is None and report["parts"] is None
    assert "none crosses: no crossing arm is trained" in done.stdout


def test_a_missing_curve_is_named(tmp_path: Path) -> None:
    cells(tmp_path, (0.40, 0.50), (0.45, 0.57))
    (tmp_path / "evals" / "dynamics" / "scalerl-s2" / "stats.json").unlink()
    done, _ = run(tmp_path)
    assert done.returncode == 2 and "no curve of scalerl-s2 (c_scalerl)" in done.stderr
