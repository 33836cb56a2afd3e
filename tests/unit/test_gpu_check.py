"""benchmarks/gpu_check.py on the CPU: argument parsing, the table, the clean skip without CUDA, and
the step / log-prob checks themselves run on the CPU device (the script runs them on CUDA)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_check.py"


@pytest.fixture(scope="module")
def gc():
    spec = importlib.util.spec_from_file_location("gpu_check", PATH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = mod  # dataclasses look their module up there
    try:
        spec.loader.exec_module(mod)
        yield mod
    finally:
        sys.modules.pop("gpu_check", None)


def test_parse_args_defaults_and_groups(gc):
    a = gc.parse_args([])
    assert a.only == gc.GROUPS and a.budget_s == 480 and not a.no_vllm and a.model == ""
    a = gc.parse_args(["--only", "step,logp", "--budget-s", "60", "--no-vllm", "--prompts", "8"])
    assert a.only == ("step", "logp") and a.budget_s == 60 and a.no_vllm and a.prompts == 8


@pytest.mark.parametrize("argv", [["--only", "step,bogus"], ["--budget-s", "0"], ["--prompts", "0"],
                                  ["--max-new-tokens", "-1"], ["--budget-s", "x"]])
def test_parse_args_refuses_bad_values(gc, argv, capsys):
    with pytest.raises(SystemExit) as e:
        gc.parse_args(argv)
    assert e.value.code == 2 and "error:" in capsys.readouterr().err


def test_format_table_aligns_and_counts(gc):
    rows = [gc.Row("step/sync/float32", gc.PASS, "loss +0.1", 1.25), gc.Row("logp/vllm", gc.SKIP, "no vllm"),
            gc.Row("x", gc.FAIL, "RuntimeError: boom", 12.0)]
    out = gc.format_table(rows).splitlines()
    assert out[0].split() == ["check", "status", "s", "numbers"]
    assert set(out[1]) == {"-"}
    body = out[2:5]
    assert [line.split()[1] for line in body] == ["PASS", "SKIP", "FAIL"]
    col = out[0].index("status")
    assert all(line[col:col + 4] in ("PASS", "SKIP", "FAIL") for line in body)  # aligned status column
    assert "1.2" in body[0] and "12.0" in body[2] and body[2].endswith("RuntimeError: boom")
    assert out[-1] == "1 passed, 1 failed, 1 skipped"


def test_runner_isolates_failures_and_respects_the_budget(gc):
    run = gc.Runner(budget_s=1000)
    run.run("ok", lambda: (gc.PASS, "1"))
    run.run("boom", lambda: 1 / 0)
    assert [(r.check, r.status) for r in run.rows] == [("ok", "PASS"), ("boom", "FAIL")]
    assert run.rows[1].numbers.startswith("ZeroDivisionError")
    run.budget_s = -1
    run.run("late", lambda: (gc.PASS, ""))
    assert run.rows[-1].status == gc.SKIP and "budget" in run.rows[-1].numbers


def test_diff_stats(gc):
    a, b = torch.tensor([[0.0, 1.0], [2.0, 5.0]]), torch.tensor([[0.5, 1.0], [2.0, 0.0]])
    mask = torch.tensor([[True, True], [True, False]])
    assert gc.diff_stats(a, b, mask) == pytest.approx((0.5 / 3, 0.5))
    assert gc.diff_stats(a, b, torch.zeros_like(mask)) == (0.0, 0.0)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA path")
def test_main_without_cuda_skips_cleanly(gc, capsys):
    assert gc.main(["--only", "step"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert any(line.startswith("cuda") and "SKIP" in line and "no CUDA" in line for line in out)
    assert json.loads(out[-1])[0]["status"] == "SKIP"


def test_step_and_native_logp_checks_run_on_the_cpu(gc, tmp_path):
    status, numbers = gc.check_step("sync", "float32", str(tmp_path), device="cpu")
    assert status == gc.PASS, numbers
    from rlvr.train.tiny_hf import build_tiny_hf

    path = str(build_tiny_hf(tmp_path / "llama", hidden=32, layers=1, heads=4))
    a = SimpleNamespace(prompts=4, max_new_tokens=8, logp_mean_tol=0.02, logp_max_tol=1.0)
    status, numbers = gc.check_native_logp(path, "bfloat16", a, device="cpu")
    assert status == gc.PASS and "mean|diff|" in numbers, numbers
