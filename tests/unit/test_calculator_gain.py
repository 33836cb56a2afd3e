"""benchmarks/studies/calculator_gain.py: the calculator protocol's verdict from run folders (first
and last held-out success, the gain, the Student-t interval over seeds, the pass rule)."""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "studies" / "calculator_gain.py"
spec = importlib.util.spec_from_file_location("calculator_gain", SCRIPT)
calculator_gain = importlib.util.module_from_spec(spec)
spec.loader.exec_module(calculator_gain)


def _run(root: Path, seed: int, before: float, after: float, wall: float | None = 300.0) -> Path:
    run = root / f"s{seed}"
    run.mkdir()
    (run / "config.yaml").write_text(yaml.safe_dump({"pretrain": {"seed": 9}, "train": {"seed": seed}}))
    rows = [{"step": 1, "heldout_pass_rate": before, "tool_calls": 0.5, "failed_call_share": 0.1,
             "pass_rate_with_call": 0.3}, {"step": 2}, {"step": 3, "heldout_pass_rate": after, "tool_calls": 1.0,
                                                       "failed_call_share": 0.0, "pass_rate_with_call": 0.6}]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run / "train_summary.json").write_text(json.dumps({"wall_s": 250.0}))
    if wall is not None:
        (run / "command_wall_s").write_text(f"{wall}\n")
    return run


def test_gain_is_last_minus_first_heldout_and_seed_is_the_rl_seed(tmp_path):
    row = calculator_gain.seed_row(_run(tmp_path, 4, 0.4, 0.65))
    assert (row["seed"], row["first_step"], row["last_step"]) == (4, 1, 3)
    assert row["gain"] == pytest.approx(0.25)
    assert (row["wall_s"], row["steps_wall_s"]) == (300.0, 250.0)


def test_student_t_interval_and_pass_rule(tmp_path):
    rows = [calculator_gain.seed_row(_run(tmp_path, s, 0.4, 0.4 + g)) for s, g in enumerate((0.2, 0.3, 0.25))]
    v = calculator_gain.verdict(rows)
    half = 4.302653 * 0.05 / math.sqrt(3)  # t(0.975, 2) * sd / sqrt(n)
    assert v["mean_gain"] == pytest.approx(0.25)
    assert (v["lo"], v["hi"]) == (pytest.approx(0.25 - half, abs=1e-5), pytest.approx(0.25 + half, abs=1e-5))
    assert v["pass"] is True


@pytest.mark.parametrize("gains", [(0.2, -0.1, 0.2), (0.05, 0.06, 0.07)])
def test_fails_when_interval_covers_zero_or_mean_below_bar(tmp_path, gains):
    rows = [calculator_gain.seed_row(_run(tmp_path, s, 0.4, 0.4 + g)) for s, g in enumerate(gains)]
    assert calculator_gain.verdict(rows)["pass"] is False


def test_cli_prints_the_table_and_verdict(tmp_path):
    runs = [str(_run(tmp_path, s, 0.3, 0.5, wall=None)) for s in range(3)]
    out = subprocess.run([sys.executable, str(SCRIPT), *runs], capture_output=True, text=True, check=True).stdout
    assert "| 0 | 0.300 (1) | 0.500 (3) | +0.200 | nan s (250 s) |" in out
    assert "| 2 | 0.50 -> 1.00 | 0.100 -> 0.000 | 0.300 -> 0.600 |" in out
    assert json.loads(out[out.index("{"):])["max_wall_s"] == 250.0
