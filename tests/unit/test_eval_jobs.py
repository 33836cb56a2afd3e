"""benchmarks/speed/eval_jobs.py (evaluation cells side by side against one after the other): its
cells sample the held-out problems they name, with the evaluation's seeds."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "speed" / "eval_jobs.py"
sys.path.insert(0, str(SCRIPT.parent))  # its sibling step_throughput.py
_spec = importlib.util.spec_from_file_location("eval_jobs", SCRIPT)
eval_jobs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(eval_jobs)


def test_cells_are_one_hash_each_the_same_draws_again_and_other_problems_apart(tmp_path):
    from step_throughput import quick_base

    base = str(quick_base(tmp_path))  # a random tiny model: no pretraining
    short = ("sampling.max_new_tokens=12", "sampling.interruption_budget=8")
    both = eval_jobs.sample_cells(0, 2, 2, 3, 1, str(tmp_path / "a"), base, short)
    assert len(both["hashes"]) == 2 and both["hashes"][0] != both["hashes"][1]  # other problems, other text
    second = eval_jobs.sample_cells(1, 1, 2, 3, 1, str(tmp_path / "b"), base, short)  # cell 1 alone, as a side runs it
    assert second["hashes"] == both["hashes"][1:] and second["wall_s"] > 0


@pytest.mark.parametrize("flag", ["--cells", "--problems", "--n", "--rounds"])
def test_a_count_below_one_is_one_clear_error_before_any_sampling(flag, capsys, monkeypatch):
    monkeypatch.setattr(eval_jobs, "run_side", lambda *a: pytest.fail("sampled despite a bad count"))
    with pytest.raises(SystemExit) as e:
        eval_jobs.main([flag, "0"])
    assert e.value.code == 2 and f"{flag} must be >= 1 (got 0)" in capsys.readouterr().err
