"""benchmarks/speed/shared_runs.py (K runs sharing one device): its step time and its no-CUDA exit,
without a GPU."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "speed" / "shared_runs.py"
_spec = importlib.util.spec_from_file_location("shared_runs", SCRIPT)
shared_runs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(shared_runs)


def test_step_seconds_leave_out_the_warm_up_steps():
    walls = [5.0, 6.5, 7.0, 8.0, 9.0, 11.0]  # steps 1-2 warm up; then 1, 1, 2 s
    assert shared_runs.step_seconds(walls) == 1.0
    assert shared_runs.step_seconds(walls, skip=0) == 1.0  # diffs 1.5, .5, 1, 1, 2
    assert math.isnan(shared_runs.step_seconds([1.0, 2.0, 3.0]))


def test_each_run_gets_the_recipe_its_device_and_its_own_seed(tmp_path):
    cmd = shared_runs.train_command("cuda:0", 20, 3, tmp_path / "r")
    assert "algo.prompts_per_step=64" in cmd and "algo.group_size=8" in cmd and "train.device=cuda:0" in cmd
    assert "train.seed=3" in cmd and "train.steps=20" in cmd and cmd[-3:] == ["--run-dir", str(tmp_path / "r"),
                                                                                 "--quiet"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is here: the script would run")
def test_without_cuda_it_skips_and_exits_0(capsys):
    assert shared_runs.main(["--device", "cuda"]) == 0
    assert capsys.readouterr().out.strip() == "cuda SKIP no CUDA"
