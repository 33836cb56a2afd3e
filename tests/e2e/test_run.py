"""The README's first command: `rlvr run` parses and a tiny configuration of it runs end to end."""

import json
import subprocess
import sys
from pathlib import Path

from rlvr.cli import build_parser, main


def test_main_job_command_parses():
    args = build_parser().parse_args(["run"])
    assert args.command == "run" and args.config == "quickstart"


def test_makefile_run_target_calls_rlvr_run():
    text = (Path(__file__).parents[2] / "Makefile").read_text()
    assert "$(VENV)/bin/rlvr run" in text and "pytest tests" in text


def test_tiny_main_job_end_to_end(tiny_overrides, tmp_path, capsys):
    run_dir = tmp_path / "run"
    rc = main(["run", *tiny_overrides, "algo.prompts_per_step=4", "algo.group_size=4", "train.steps=2",
               "train.eval_problems=6", "train.final_eval_samples=4", "sampling.max_new_tokens=24",
               "sampling.interruption_budget=16", "--run-dir", str(run_dir), "--quiet"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "pass@1" in out and "pass@4" in out
    ev = json.loads((run_dir / "eval.json").read_text())
    assert set(ev["base"]["pass_at_k"]) == {"1", "2", "4"} and set(ev["trained"]["pass_at_k"]) == {"1", "2", "4"}
    assert ev["base"]["problems"] == 6 and "support" in ev and "perplexity_under_base" in ev
    assert (run_dir / "samples.jsonl").exists() and (run_dir / "config.yaml").exists()
    assert (run_dir / "report.html").exists()
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x)["step"] for x in lines] == [1, 2]
    # model.dtype=auto (pinned to float32 in tests): the run records what it resolved to, and where
    assert "dtype: float32" in (run_dir / "config.yaml").read_text()
    machine = json.loads((run_dir / "machine.json").read_text())
    assert machine["precision"] == "float32" and machine["cpu"] and "avx2" in machine["flags"]
    assert ev["machine"]["precision"] == "float32" and ev["machine"]["torch"] == machine["torch"]
    assert "machine: " in out and "precision float32" in (run_dir / "report.html").read_text()


def test_cli_help_lists_every_command():
    out = subprocess.run([sys.executable, "-m", "rlvr.cli", "--help"], capture_output=True, text=True).stdout
    for name in ("run", "pretrain", "train", "eval", "fit", "weights", "collapse", "report", "config"):
        assert name in out
