"""`rlvr excursions` end to end on the tiny model: a 1 x 2 grid run through the experiment framework,
its table and plots, and a rerun that reuses every finished cell (one cache: the framework's) without
training or evaluating."""

from __future__ import annotations

import json

import pytest

import rlvr.experiments.evaluate as evaluate
import rlvr.experiments.models as models
from rlvr.cli import main
from rlvr.config import load_excursions
from rlvr.experiments.excursions_grid import grid_experiment
from rlvr.experiments.models import model_config

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
    assert len((out / "models" / "m1.00_rl" / "metrics.jsonl").read_text().splitlines()) == 2
    md = (out / "table.md").read_text()
    assert "| 1.00 | parallel |" in md and "2 optimiser steps" in md
    assert {p.name for p in (out / "plots").iterdir()} == {"pass_at_1.png", "pass_at_8.png",
                                                          "retention_strings.png", "retention_strings_nll.png"}
    # one cell cache: the framework's models and evaluations, nothing beside them
    assert {p.name for p in out.iterdir()} == {"models", "evals", "table.json", "table.md", "plots"}
    stamps = {p: p.stat().st_mtime_ns for p in [*out.glob("models/*/done.json"), *out.glob("evals/*/*/stats.json")]}
    assert len(stamps) == 2 + 3 * 2  # the trained models; 3 rows x (pass@k, retention)

    def no_work(*a, **k):
        raise AssertionError("a finished cell was trained or evaluated again")

    monkeypatch.setattr(models, "run_pipeline", no_work)
    monkeypatch.setattr(evaluate, "sample_chunks", no_work)
    assert main(["excursions", "excursions", *grid, "--quiet"]) == 0
    again = json.loads((out / "table.json").read_text())["rows"]
    assert all(r["reused"] for r in again)
    assert [r["pass@1"] for r in again] == [r["pass@1"] for r in rows]
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps


def _rl_key(overrides: list[str]) -> str:
    cfg, layout = load_excursions("excursions", overrides)
    exp = grid_experiment(cfg, layout, "excursions", overrides)
    spec = exp.models["m1.00_rl"]
    return models._key(model_config(exp, spec, None), spec, "the base", "")


def test_model_keys_track_budget_not_layout(grid):
    """A model's key covers how it trains, not the grid: moving the grid, dropping a pipeline or evaluating
    otherwise keeps finished models; a new budget retrains."""
    key = _rl_key(grid)
    assert _rl_key([*grid, "excursions.out_dir=/elsewhere", "excursions.pipelines=[rl]",
                    "excursions.eval_samples=4"]) == key
    assert _rl_key([*grid, "excursions.steps=3"]) != key


def test_the_distill_teacher_is_the_last_rl_model_unless_a_checkpoint_is_named(grid):
    cfg, layout = load_excursions("excursions", [*grid, "excursions.pipelines=[distill]"])
    exp = grid_experiment(cfg, layout, "excursions", grid)
    assert list(exp.models)[:2] == ["base", "m1.00_rl"] and exp.models["m1.00_distill"].teacher == "m1.00_rl"
    cfg, layout = load_excursions("excursions", [*grid, "excursions.pipelines=[distill]", "excursions.teacher=/t"])
    exp = grid_experiment(cfg, layout, "excursions", grid)
    assert "m1.00_rl" not in exp.models and exp.models["m1.00_distill"].teacher == ""


def test_bad_milestone_is_a_user_error(grid, capsys):
    assert main(["excursions", "excursions", *grid, "excursions.milestones=[0.3]", "--quiet"]) == 2
    assert "pretrain.milestones" in capsys.readouterr().err
