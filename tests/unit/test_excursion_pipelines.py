"""The excursion pipelines call ``on_step`` after every optimiser step (so that rl_steps and parallel
models keep milestone checkpoints as SFT does); sft_then_rl does not. The steps themselves are
stubbed: what is tested is the count passed on, not the training."""

from __future__ import annotations

import types

import pytest

import rlvr.train.excursions as excursions
from rlvr.config import load_config

OVERRIDES = ["excursions.steps=5", "algo.minibatches=1", "algo.ppo_epochs=1"]


class Log:
    def __init__(self):
        self.lines = []

    def write(self, line: dict) -> None:
        self.lines.append(line)


@pytest.fixture
def stubbed(monkeypatch):
    """RL and averaged steps that only count samples (16 a step); SFT data of 3 pairs."""
    def rl_step(st, total):
        st.samples += 16
        return {"reward": 0.0}

    def parallel_step(st, opt, batch, total, weight):
        st.samples += 16
        return {"reward": 0.0}

    monkeypatch.setattr(excursions, "build_state", lambda cfg, model, tok: types.SimpleNamespace(samples=0))
    monkeypatch.setattr(excursions, "rl_step", rl_step)
    monkeypatch.setattr(excursions, "parallel_step", parallel_step)
    monkeypatch.setattr(excursions, "sft_optimizer", lambda *a: None)
    monkeypatch.setattr(excursions, "sft_update", lambda model, tok, batch, opt, clip: {"sft_loss": 1.0})
    monkeypatch.setattr(excursions, "sft_pairs", lambda problems, mode: [("1+1=", "2")] * 3)
    monkeypatch.setattr(excursions, "train_problems", lambda cfg, task: [])


@pytest.mark.parametrize("pipeline", ["rl", "parallel", "sft"])
def test_every_optimiser_step_is_reported(stubbed, pipeline):
    cfg = load_config("excursions", OVERRIDES)
    seen: list[int] = []
    budget = excursions.run_pipeline(cfg, pipeline, None, None, None, Log(), on_step=seen.append)
    assert seen == [1, 2, 3, 4, 5] and budget["opt_steps"] == 5
    assert budget["policy_samples"] == (0 if pipeline == "sft" else 80)


def test_sft_then_rl_reports_nothing(stubbed):
    cfg = load_config("excursions", OVERRIDES)
    seen: list[int] = []
    budget = excursions.run_pipeline(cfg, "sft_then_rl", None, None, None, Log(), on_step=seen.append)
    assert seen == [] and budget["opt_steps"] == 5 and budget["policy_samples"] == 3 * 16
