"""The step-throughput benchmark's quick mode (benchmarks/speed/step_throughput.py): it runs, measures
both sides, and its numerics check passes on equal sides and fails on a gradient off by more than
its tolerance."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "speed" / "step_throughput.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("step_throughput", PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_quick_mode_measures_and_passes(bench, capsys):
    record = bench.main(["--quick"])
    assert record["numerics"][0]["passed"]
    assert record["numerics"][0]["grad"] == 0.0  # this tree on both sides: bit-identical
    assert record["median"]["current"]["step_s"] > 0 and record["median"]["current"]["forward+backward"] > 0
    assert "ratio" in capsys.readouterr().out


def test_numerics_check_fails_past_tolerance(bench):
    import torch

    def side(grad_scale: float, tokens: str = "t") -> dict:
        grad = {"w": torch.tensor([1.0, -2.0]) * grad_scale}
        params = {"w": torch.tensor([0.5, 0.25])}
        return {"tokens": [tokens], "grad": grad, "params0": {"w": torch.zeros(2)}, "params1": params, "params": params,
                "steps": [{"metrics": {"loss": 1.0}}]}

    assert bench.numerics(side(1.0), side(1.0))["passed"]
    assert bench.numerics(side(1.0 + 0.5 * bench.TOLERANCE["grad"]), side(1.0))["passed"]
    assert not bench.numerics(side(1.0 + 3 * bench.TOLERANCE["grad"]), side(1.0))["passed"]
    assert not bench.numerics(side(1.0, tokens="u"), side(1.0))["passed"]  # different samples: no check
