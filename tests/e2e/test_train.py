"""End-to-end RL on the tiny model: runs, resumes exactly, warns on silent failures."""

import json
import time

import pytest
import torch

from rlvr.cli import main
from rlvr.config import load_config
from rlvr.log import read_metrics
from rlvr.train.checkpoint import latest_good_checkpoint
from rlvr.train.loop import train

VOLATILE = {"wall_s", "gen_s", "train_s", "score_s", "scored_per_s"}


def _cfg(tiny_overrides, *extra):
    return load_config("quickstart", [*tiny_overrides, "algo.prompts_per_step=4", "algo.group_size=4",
                                      "train.eval_problems=8", "train.eval_every=2", "sampling.max_new_tokens=24",
                                      "sampling.interruption_budget=16", *extra])


def _stable(rows):
    return [{k: v for k, v in r.items() if k not in VOLATILE} for r in rows]


def test_resume_gives_the_same_metrics_as_an_uninterrupted_run(tiny_overrides, tmp_path):
    cfg = _cfg(tiny_overrides, "train.deterministic=true", "train.checkpoint_every=2", "train.steps=4",
               "algo.npr_threshold=0.5")
    full = train(cfg, run_dir=tmp_path / "full", progress="none")
    half_cfg = _cfg(tiny_overrides, "train.deterministic=true", "train.checkpoint_every=2", "train.steps=2",
                    "algo.npr_threshold=0.5")
    part = train(half_cfg, run_dir=tmp_path / "part", progress="none")
    train(resume=part, extra_steps=4, progress="none")
    a, b = _stable(read_metrics(full)), _stable(read_metrics(part))
    assert [r["step"] for r in b] == [1, 2, 3, 4]
    assert a == b
    state_a = json.loads((latest_good_checkpoint(full) / "state.json").read_text())
    state_b = json.loads((latest_good_checkpoint(part) / "state.json").read_text())
    assert state_a["tracker"] == state_b["tracker"] and state_a["data"] == state_b["data"]


def test_resume_with_nothing_to_do_warns(tiny_overrides, tmp_path):
    run = train(_cfg(tiny_overrides, "train.steps=1"), run_dir=tmp_path / "r", progress="none")
    with pytest.warns(RuntimeWarning, match="zero steps would run"):
        train(resume=run, progress="none")
    assert len(read_metrics(run)) == 1


def test_corrupt_checkpoint_falls_back_to_previous(tiny_overrides, tmp_path):
    run = train(_cfg(tiny_overrides, "train.steps=2", "train.checkpoint_every=1", "train.keep_last=3"),
                run_dir=tmp_path / "r", progress="none")
    newest = latest_good_checkpoint(run)
    (newest / "model.safetensors").write_bytes(b"garbage")
    with pytest.warns(RuntimeWarning, match="corrupt or partial"):
        good = latest_good_checkpoint(run)
    assert good.name == "step_000001"


def test_zero_variance_batches_are_reported(tiny_overrides, tmp_path):
    # a reward that is always 0: every group is constant, no gradient
    cfg = _cfg(tiny_overrides, "train.steps=1", "task.name=strings", "sampling.max_new_tokens=2",
               "sampling.interruption_budget=0", "sampling.temperature=0")  # greedy: no EOS by chance
    with pytest.warns(RuntimeWarning, match="identical rewards"):
        run = train(cfg, run_dir=tmp_path / "z", progress="none")
    m = read_metrics(run)[-1]
    assert m["zero_var_frac"] == 1.0 and m["warnings"]["steps_without_gradient"] == 1
    assert m["truncation_rate"] == 1.0 and m["warnings"]["all_truncated_steps"] == 1


def test_cli_train_bad_inputs(capsys, tmp_path):
    assert main(["train", "no_such_recipe"]) == 2
    assert "no such config file" in capsys.readouterr().err
    t0 = time.time()
    assert main(["train", "quickstart", "task.name=arithmetik"]) == 2  # fails before any pretraining
    assert "did you mean 'arithmetic'" in capsys.readouterr().err and time.time() - t0 < 30
    assert main(["run", "loss.name=cispo2"]) == 2
    assert "did you mean 'cispo'" in capsys.readouterr().err
    assert main(["train", "reward.kind=self_certainity"]) == 2
    assert "reward.kind" in capsys.readouterr().err
    assert main(["train", "--resume", "/nonexistent/run"]) == 2
    assert "--resume /nonexistent/run does not exist" in capsys.readouterr().err
    assert main(["train", "--resume", str(tmp_path)]) == 2  # a folder, but no config.yaml in it
    assert "not a run directory" in capsys.readouterr().err


def test_micro_batching_does_not_change_the_update(tiny_overrides, tmp_path):
    params = []
    for micro in (0, 3):
        cfg = _cfg(tiny_overrides, "train.steps=1", "train.deterministic=true", f"algo.micro_batch_size={micro}",
                   "algo.minibatches=1")
        run = train(cfg, run_dir=tmp_path / f"m{micro}", progress="none")
        from safetensors.torch import load_file

        params.append(load_file(str(latest_good_checkpoint(run) / "model.safetensors")))
    for k in params[0]:
        assert torch.allclose(params[0][k], params[1][k], atol=1e-6), k
