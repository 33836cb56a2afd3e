"""rlvr.analysis.metric_series: per-epoch means, the line-by-line mean of runs, the timing-free lines."""

from __future__ import annotations

import pytest

from rlvr.analysis.metric_series import WALL_CLOCK_KEYS, epoch_means, mean_over_runs, without_wall_clock
from rlvr.errors import UserError


def test_epoch_blocks_skip_eval_lines_and_missing_values() -> None:
    lines = [{"step": 1, "gt_accuracy": 0.2}, {"step": 2, "gt_accuracy": 0.4}, {"heldout_pass_rate": 0.3},
             {"step": 3, "gt_accuracy": 0.6}, {"step": 4}, {"step": 5, "gt_accuracy": 1.0}]
    rows = epoch_means(lines, 2, ["gt_accuracy", "nope"])
    assert [r["epoch"] for r in rows] == [1, 2, 3]
    assert [r["steps"] for r in rows] == ["1-2", "3-4", "5-5"]
    assert [r["gt_accuracy"] for r in rows] == pytest.approx([0.3, 0.6, 1.0])
    assert all(r["nope"] is None for r in rows)


def test_mean_over_runs_averages_flops_and_shared_evaluations() -> None:
    a = [{"step": 1, "flops": 10.0, "heldout_pass_rate": 0.2}, {"step": 2, "flops": 20.0},
         {"step": 3, "flops": 30.0, "heldout_pass_rate": 0.5}]
    b = [{"step": 1, "flops": 14.0, "heldout_pass_rate": 0.4}, {"step": 2, "flops": 22.0, "heldout_pass_rate": 0.9},
         {"step": 3, "flops": 34.0, "heldout_pass_rate": 0.7}]
    rows = mean_over_runs([a, b])
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert [r["flops"] for r in rows] == [12.0, 21.0, 32.0]
    assert rows[0]["heldout_pass_rate"] == pytest.approx(0.3)
    assert "heldout_pass_rate" not in rows[1]  # only one run evaluated at step 2
    assert rows[2]["heldout_pass_rate"] == pytest.approx(0.6)


def test_mean_over_runs_refuses_runs_with_different_steps() -> None:
    a = [{"step": 1, "flops": 1.0}, {"step": 2, "flops": 2.0}]
    b = [{"step": 1, "flops": 1.0}]
    with pytest.raises(UserError, match="same metrics steps"):
        mean_over_runs([a, b])


def test_a_resumed_run_equals_its_reference_apart_from_wall_clock() -> None:
    """kill_resume.py and faults.py compare runs this way; their old list (wall_s, gen_s, train_s)
    missed the reward phase's timing, so a correct resume of any run read as different."""
    reference = [{"step": 1, "reward": 0.5, "wall_s": 1.0, "gen_s": 0.4, "train_s": 0.5, "score_s": 0.10,
                  "scored_per_s": 640.0}]
    resumed = [{"step": 1, "reward": 0.5, "wall_s": 2.0, "gen_s": 0.9, "train_s": 0.7, "score_s": 0.13,
                "scored_per_s": 492.3}]
    assert without_wall_clock(resumed) == without_wall_clock(reference) == [{"step": 1, "reward": 0.5}]
    assert without_wall_clock([{"step": 1, "reward": 0.5}]) != without_wall_clock([{"step": 1, "reward": 0.25}])
    assert {"score_s", "scored_per_s", "wall_s"} <= WALL_CLOCK_KEYS and "reward" not in WALL_CLOCK_KEYS
