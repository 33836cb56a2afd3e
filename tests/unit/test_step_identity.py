"""benchmarks/checks/step_identity.py compare, run as a user runs it: a changed metric or weight is
reported and exits 1; equal captures (NaN equal to NaN) print IDENTICAL and exit 0."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "checks" / "step_identity.py"


def _compare(tmp_path, old, new):
    (tmp_path / "a.json").write_text(json.dumps(old))
    (tmp_path / "b.json").write_text(json.dumps(new))
    return subprocess.run([sys.executable, str(SCRIPT), "compare", str(tmp_path / "a.json"), str(tmp_path / "b.json")],
                          capture_output=True, text=True, timeout=120)


def test_compare_reports_every_difference(tmp_path):
    run = {"metrics": [{"loss": 0.5, "kl": float("nan")}], "weights": {"w": "abc"}}
    same = _compare(tmp_path, {"r": run}, {"r": run})
    assert same.returncode == 0 and same.stdout.strip() == "IDENTICAL"
    changed = {"metrics": [{"loss": 0.25, "kl": float("nan"), "new": 1}], "weights": {"w": "abd"}}
    diff = _compare(tmp_path, {"r": run}, {"r": changed})
    assert diff.returncode == 1
    assert "r step 1 loss: 0.5 -> 0.25" in diff.stdout and "r step 1 new: '<absent>' -> 1" in diff.stdout
    assert "r: 1 weight tensors differ" in diff.stdout and diff.stdout.strip().endswith("3 differences")
