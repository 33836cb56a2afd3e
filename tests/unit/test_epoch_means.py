"""benchmarks/studies/epoch_means.py, run as a user runs it: per-epoch means of a test-time run's
metrics (the means themselves: tests/unit/test_metric_series.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rlvr.config import dump_yaml, load_config

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "studies" / "epoch_means.py"


def test_cli_reads_epoch_length_from_config(tmp_path: Path) -> None:
    cfg = load_config("ttrl")  # 64 test-time problems, 16 prompts per step -> 4 steps per epoch
    (tmp_path / "config.yaml").write_text(dump_yaml(cfg))
    rows = [{"step": s, "gt_accuracy": s / 10} for s in range(1, 9)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path), "--keys", "gt_accuracy", "--json"],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    epochs = [json.loads(x) for x in out]
    assert [e["steps"] for e in epochs] == ["1-4", "5-8"]
    assert [e["gt_accuracy"] for e in epochs] == pytest.approx([0.25, 0.65])


def test_cli_errors_name_the_fix(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True)
    assert res.returncode != 0 and "does not exist" in res.stderr
    (tmp_path / "metrics.jsonl").write_text('{"step": 1}\n')
    (tmp_path / "config.yaml").write_text(dump_yaml(load_config("quickstart")))
    res = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True)
    assert res.returncode != 0 and "--steps-per-epoch" in res.stderr
