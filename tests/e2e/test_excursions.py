"""`rlvr excursions` end to end on the tiny model: a 1 x 2 grid, its table and plots, and a rerun
that reuses every finished cell without training."""

from __future__ import annotations

import json

import pytest

import rlvr.train.excursions as ex
from rlvr.cli import main
from rlvr.config import load_config

GRID = ["excursions.milestones=[1.0]", "excursions.pipelines=[rl,parallel]", "excursions.steps=2",
        "excursions.eval_problems=4", "excursions.eval_samples=8", "excursions.retention_problems=4",
        "algo.prompts_per_step=2", "algo.group_size=4", "task.train_size=40", "sampling.max_new_tokens=20"]


@pytest.fixture
def grid(tiny_overrides, tmp_path):
    return [*tiny_overrides, *GRID, f"excursions.out_dir={tmp_path / 'grid'}"]


def test_grid_runs_then_reuses_finished_cells(grid, tmp_path, monkeypatch):
    assert main(["excursions", "excursions", *grid, "--quiet"]) == 0
    out = tmp_path / "grid"
    table = json.loads((out / "table.json").read_text())
    rows = table["rows"]
    assert [(r["milestone"], r["pipeline"]) for r in rows] == [(1.0, "base"), (1.0, "rl"), (1.0, "parallel")]
    assert not any(r["reused"] for r in rows)
    by = {r["pipeline"]: r for r in rows}
    # equal budgets: 2 optimiser steps, 2 x P*G policy samples; parallel adds 2 x P*G gold pairs
    assert by["rl"]["opt_steps"] == by["parallel"]["opt_steps"] == 2
    assert by["rl"]["policy_samples"] == by["parallel"]["policy_samples"] == 16
    assert by["parallel"]["sft_pairs"] == 16 and by["rl"]["sft_pairs"] == 0 and by["base"]["opt_steps"] == 0
    for r in rows:
        assert set(r) >= {"pass@1", "pass@8", "retention_strings"} and "pass@32" not in r  # k <= 8 samples
        assert 0 < r["retention_strings_nll"] < 10
        assert 0 <= r["pass@1"] <= r["pass@8"] <= 1
    assert len((out / "m1.00" / "rl" / "metrics.jsonl").read_text().splitlines()) == 2
    md = (out / "table.md").read_text()
    assert "| 1.00 | parallel |" in md and "2 optimiser steps" in md
    assert {p.name for p in (out / "plots").iterdir()} == {"pass_at_1.png", "pass_at_8.png",
                                                          "retention_strings.png", "retention_strings_nll.png"}
    stamps = {p: p.stat().st_mtime_ns for p in out.glob("m1.00/*/done.json")}
    assert len(stamps) == 3

    def no_training(*a, **k):
        raise AssertionError("a finished cell was trained again")

    monkeypatch.setattr(ex, "run_pipeline", no_training)
    monkeypatch.setattr(ex, "evaluate_policy", no_training)
    assert main(["excursions", "excursions", *grid, "--quiet"]) == 0
    again = json.loads((out / "table.json").read_text())["rows"]
    assert all(r["reused"] for r in again)
    assert [r["pass@1"] for r in again] == [r["pass@1"] for r in rows]
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps


def test_cell_key_tracks_budget_not_layout(grid, tmp_path):
    cfg = load_config("excursions", grid)
    key = ex.cell_key(cfg, "rl", tmp_path, None)
    moved = load_config("excursions", [*grid, "excursions.out_dir=/elsewhere", "excursions.pipelines=[rl]"])
    assert ex.cell_key(moved, "rl", tmp_path, None) == key  # layout changes keep finished cells
    longer = load_config("excursions", [*grid, "excursions.steps=3"])
    assert ex.cell_key(longer, "rl", tmp_path, None) != key  # a new budget reruns the cell
    assert ex.cell_key(cfg, "sft", tmp_path, None) != key


def test_bad_milestone_is_a_user_error(grid, capsys):
    assert main(["excursions", "excursions", *grid, "excursions.milestones=[0.3]", "--quiet"]) == 2
    assert "pretrain.milestones" in capsys.readouterr().err
