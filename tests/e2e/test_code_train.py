"""`rlvr train code`: the code task trains end to end, every rollout going through the task's batch
verifier (the sandbox) once per step."""

from __future__ import annotations

import sys

import pytest

from rlvr.config import load_config
from rlvr.log import read_metrics
from rlvr.tasks.code_synth import CodeSynthTask

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox needs Linux")


@pytest.mark.filterwarnings("ignore:step:RuntimeWarning")
def test_code_config_trains_and_scores_every_rollout(tmp_path, monkeypatch) -> None:
    from rlvr.train.loop import train

    seen: list[int] = []
    original = CodeSynthTask.verify_many

    def counting(self, completions, problems):
        seen.append(len(completions))
        return original(self, completions, problems)

    monkeypatch.setattr(CodeSynthTask, "verify_many", counting)
    over = ["model.d_model=32", "model.n_head=2", "model.n_layer=1", "model.context=64", "pretrain.tokens=3000",
            "train.steps=2", "algo.prompts_per_step=2", "algo.group_size=2", "train.eval_every=0",
            "train.eval_problems=2", "train.final_eval_samples=1", "task.retention_tasks=[]", "log.progress=none",
            f"train.out_dir={tmp_path}", "algo.zero_var_filter=false"]
    monkeypatch.setenv("RLVR_CACHE", str(tmp_path / "cache"))
    run = train(load_config("code", over), run_dir=tmp_path / "run", progress="none")
    steps = [r for r in read_metrics(run) if "score_s" in r]
    assert len(steps) == 2 and all(r["score_s"] >= 0 and "scored_per_s" in r for r in steps)
    assert seen[:2] == [4, 4]  # P * G rollouts per step, one batch call each
