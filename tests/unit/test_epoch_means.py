"""benchmarks/studies/epoch_means.py: per-epoch means of a test-time run's metrics."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from rlvr.config import dump_yaml, load_config

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "studies" / "epoch_means.py"
spec = importlib.util.spec_from_file_location("epoch_means", SCRIPT)
epoch_means_mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(epoch_means_mod)


def test_blocks_skip_eval_lines_and_missing_values() -> None:
    lines = [{"step": 1, "gt_accuracy": 0.2}, {"step": 2, "gt_accuracy": 0.4}, {"heldout_pass_rate": 0.3},
             {"step": 3, "gt_accuracy": 0.6}, {"step": 4}, {"step": 5, "gt_accuracy": 1.0}]
    rows = epoch_means_mod.epoch_means(lines, 2, ["gt_accuracy", "nope"])
    assert [r["steps"] for r in rows] == ["1-2", "3-4", "5-5"]
    assert [r["gt_accuracy"] for r in rows] == pytest.approx([0.3, 0.6, 1.0])
    assert all(r["nope"] is None for r in rows)


def test_cli_reads_epoch_length_from_config(tmp_path: Path) -> None:
    cfg = load_config("ttrl")  # 64 test-time problems, 16 prompts per step -> 4 steps per epoch
    (tmp_path / "config.yaml").write_text(dump_yaml(cfg))
    rows = [{"step": s, "gt_accuracy": s / 10} for s in range(1, 9)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path), "--keys", "gt_accuracy", "--json"],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    got = [json.loads(x) for x in out]
    assert [g["steps"] for g in got] == ["1-4", "5-8"]
    assert [g["gt_accuracy"] for g in got] == pytest.approx([0.25, 0.65])


def test_cli_errors_name_the_fix(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True)
    assert res.returncode != 0 and "does not exist" in res.stderr
    (tmp_path / "metrics.jsonl").write_text('{"step": 1}\n')
    (tmp_path / "config.yaml").write_text(dump_yaml(load_config("quickstart")))
    res = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True)
    assert res.returncode != 0 and "--steps-per-epoch" in res.stderr
