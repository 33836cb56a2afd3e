"""The testbed matrix: its checks and table from cell results (rlvr.analysis.testbed_matrix), and the
quick form of benchmarks/studies/testbed_matrix.py, run as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from rlvr.analysis.testbed_matrix import checks, markdown

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "studies" / "testbed_matrix.py"


def _cell(p, r, gain, base=0.2, falls=False, ret=0.45):
    return {"pretrain_seed": p, "rl_seed": r, "dtype": "float32", "precision": "float32", "base_pass1": base,
            "trained_pass1": base + gain, "gain": gain, "gain_ci": [gain - 0.03, gain + 0.03],
            "curve": {"change": -0.1 if falls else 0.01, "lo": -0.2 if falls else -0.03,
                      "hi": -0.05 if falls else 0.05, "falls": falls},
            "retention": {"strings": {"base": ret, "trained": ret - 0.05, "delta": -0.05, "delta_ci": [-0.1, 0.0]}},
            "rl_wall_s": 100.0, "wall_s": 150.0}


def test_checks_fail_on_each_criterion():
    good = [_cell(0, 0, 0.25), _cell(1, 0, 0.22)]
    assert all(checks(good, 0.20).values())
    bad = {
        "gain": [_cell(0, 0, 0.25), _cell(1, 0, 0.19)],
        "base pass@1": [_cell(0, 0, 0.25, base=0.36)],
        "curve": [_cell(0, 0, 0.25, falls=True)],
        "retention": [_cell(0, 0, 0.25, ret=0.0)],
    }
    for what, cells in bad.items():
        failed = [name for name, ok in checks(cells, 0.20).items() if not ok]
        assert len(failed) == 1 and what in failed[0], (what, failed)


def test_markdown_has_every_cell_and_the_spread():
    text = markdown([_cell(0, 0, 0.25), _cell(0, 1, 0.21), _cell(1, 0, 0.30)], {0: {"wall_s": 200.0}},
                    0.20, "cpu X", "python benchmarks/studies/testbed_matrix.py")
    assert text.count("| float32 |") == 3 and "+0.210 / +0.250 / +0.300 over 3 cells" in text
    assert "PASS: gain >= +0.20 in every cell" in text and "machine: cpu X" in text


def test_quick_matrix_runs_resumes_and_writes_its_table(tmp_path):
    out = tmp_path / "m"
    argv = [sys.executable, str(SCRIPT), "--quick", "--pretrain-seeds", "0", "--rl-seeds", "0", "--workers", "1",
            "--out", str(out)]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert res.returncode == 1, res.stderr  # the miniature cannot pass the checks: it shows the plumbing, and says FAIL
    data = json.loads((out / "matrix.json").read_text())
    assert len(data["cells"]) == 1 and set(data["checks"]) and (out / "matrix.md").exists()
    assert data["cells"][0]["pretrain_seed"] == 0 and "gain" in data["cells"][0]  # the cell result was read back
    cell = out / "cells" / "p0-r0-float32" / "cell.json"
    mtime = cell.stat().st_mtime_ns
    subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert cell.stat().st_mtime_ns == mtime  # a finished cell is read back, not run again
