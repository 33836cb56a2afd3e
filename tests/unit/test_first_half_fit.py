"""benchmarks/studies/first_half_fit.py: the line-by-line seed average behind --mean."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "studies" / "first_half_fit.py"
spec = importlib.util.spec_from_file_location("first_half_fit", SCRIPT)
first_half_fit = importlib.util.module_from_spec(spec)
spec.loader.exec_module(first_half_fit)


def test_mean_rows_averages_flops_and_shared_evaluations() -> None:
    a = [{"step": 1, "flops": 10.0, "heldout_pass_rate": 0.2}, {"step": 2, "flops": 20.0},
         {"step": 3, "flops": 30.0, "heldout_pass_rate": 0.5}]
    b = [{"step": 1, "flops": 14.0, "heldout_pass_rate": 0.4}, {"step": 2, "flops": 22.0, "heldout_pass_rate": 0.9},
         {"step": 3, "flops": 34.0, "heldout_pass_rate": 0.7}]
    rows = first_half_fit.mean_rows([a, b])
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert [r["flops"] for r in rows] == [12.0, 21.0, 32.0]
    assert rows[0]["heldout_pass_rate"] == pytest.approx(0.3)
    assert "heldout_pass_rate" not in rows[1]  # only one run evaluated at step 2
    assert rows[2]["heldout_pass_rate"] == pytest.approx(0.6)


def test_mean_rows_refuses_runs_with_different_steps() -> None:
    a = [{"step": 1, "flops": 1.0}, {"step": 2, "flops": 2.0}]
    b = [{"step": 1, "flops": 1.0}]
    with pytest.raises(SystemExit, match="same metrics steps"):
        first_half_fit.mean_rows([a, b])
