"""The GPU checklist on the CPU: the runner, the table and the step / log-prob checks of
rlvr.train.device_checks (benchmarks/checks/gpu_check.py runs them on CUDA), the script's argument
errors (its parse_args, in this process) and its clean skip without CUDA, run as a user runs it."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from rlvr.train.device_checks import (
    FAIL,
    PASS,
    SKIP,
    Row,
    Runner,
    check_native_logp,
    check_step,
    diff_stats,
    format_table,
)
from rlvr.train.tiny_hf import build_tiny_hf

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "checks" / "gpu_check.py"


def run_script(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *argv], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def script():
    """The script as a module (it imports gpu_vllm_check from its own folder, as when run)."""
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(SCRIPT.parent))
    return module


@pytest.mark.parametrize("argv", [["--only", "step,bogus"], ["--prompts", "0"]])  # our checks, not argparse's
def test_script_refuses_bad_arguments(script, argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        script.main(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "error:" in err, err


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA path")
def test_script_without_cuda_skips_cleanly():
    res = run_script("--only", "step")
    assert res.returncode == 0, res.stderr
    out = res.stdout.splitlines()
    assert any(line.startswith("cuda") and "SKIP" in line and "no CUDA" in line for line in out)
    assert out[-2] == "0 passed, 0 failed, 1 skipped"
    assert json.loads(out[-1])[0]["status"] == "SKIP"


def test_format_table_aligns_and_counts():
    rows = [Row("step/sync/float32", PASS, "loss +0.1", 1.25), Row("logp/vllm", SKIP, "no vllm"),
            Row("x", FAIL, "RuntimeError: boom", 12.0)]
    out = format_table(rows).splitlines()
    assert out[0].split() == ["check", "status", "s", "numbers"]
    assert set(out[1]) == {"-"}
    body = out[2:5]
    assert [line.split()[1] for line in body] == ["PASS", "SKIP", "FAIL"]
    col = out[0].index("status")
    assert all(line[col:col + 4] in ("PASS", "SKIP", "FAIL") for line in body)  # aligned status column
    assert "1.2" in body[0] and "12.0" in body[2] and body[2].endswith("RuntimeError: boom")
    assert out[-1] == "1 passed, 1 failed, 1 skipped"


def test_runner_isolates_failures_and_respects_the_budget():
    run = Runner(budget_s=1000)
    run.run("ok", lambda: (PASS, "1"))
    run.run("boom", lambda: 1 / 0)
    assert [(r.check, r.status) for r in run.rows] == [("ok", "PASS"), ("boom", "FAIL")]
    assert run.rows[1].numbers.startswith("ZeroDivisionError")
    run.budget_s = -1
    run.run("late", lambda: (PASS, ""))
    assert run.rows[-1].status == SKIP and "budget" in run.rows[-1].numbers


def test_diff_stats():
    a, b = torch.tensor([[0.0, 1.0], [2.0, 5.0]]), torch.tensor([[0.5, 1.0], [2.0, 0.0]])
    mask = torch.tensor([[True, True], [True, False]])
    assert diff_stats(a, b, mask) == pytest.approx((0.5 / 3, 0.5))
    assert diff_stats(a, b, torch.zeros_like(mask)) == (0.0, 0.0)


def test_step_and_native_logp_checks_run_on_the_cpu(tmp_path):
    status, numbers = check_step("sync", "float32", str(tmp_path), device="cpu")
    assert status == PASS, numbers
    path = str(build_tiny_hf(tmp_path / "llama", hidden=32, layers=1, heads=4))
    status, numbers = check_native_logp(path, "bfloat16", prompts=4, max_new_tokens=8, mean_tol=0.02, max_tol=1.0,
                                        device="cpu")
    assert status == PASS and "mean|diff|" in numbers, numbers
    status, numbers = check_native_logp(path, "bfloat16", prompts=4, max_new_tokens=8, mean_tol=0.0, max_tol=1.0,
                                        device="cpu")
    assert status == FAIL, numbers  # a tolerance nothing meets fails the check
