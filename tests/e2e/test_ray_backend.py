"""Ray backend end to end on a local 2-CPU Ray instance: the trainer, generators and verifier as
actors; a killed generator actor is replaced; clean shutdown with no leftover processes."""

from __future__ import annotations

import json
import os
import time

import psutil
import pytest
import torch

from rlvr.config import load_config
from rlvr.model.io import save_policy
from rlvr.model.tiny import TinyGPT
from rlvr.model.tokenizer import CharTokenizer

ray = pytest.importorskip("ray")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
RAY_NAMES = ("raylet", "gcs_server", "ray::", "plasma", "dashboard", "runtime_env")


def _ray_processes() -> list[str]:
    out = []
    for p in psutil.Process().children(recursive=True):
        try:
            name, cmd = p.name(), " ".join(p.cmdline())
        except psutil.Error:
            continue
        if p.status() != psutil.STATUS_ZOMBIE and any(n in name or n in cmd for n in RAY_NAMES):
            out.append(name)
    return out


def _assert_no_ray_left(grace_s: float = 30.0) -> None:
    deadline = time.monotonic() + grace_s
    while _ray_processes() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not ray.is_initialized()
    assert _ray_processes() == []


@pytest.fixture
def over(tmp_path):
    tok = CharTokenizer()
    torch.manual_seed(0)
    cfg = load_config("quickstart", ["model.n_layer=1", "model.d_model=32", "model.n_head=2"])
    save_policy(TinyGPT(cfg.model, tok.vocab_size), tok, tmp_path / "init")
    return ["model.n_layer=1", "model.d_model=32", "model.n_head=2", f"model.init_from={tmp_path / 'init'}",
            "task.train_size=32", "train.eval_problems=4", "train.eval_every=0", "algo.prompts_per_step=4",
            "algo.group_size=4", "algo.minibatches=1", "algo.npr_threshold=0", "sampling.max_new_tokens=10",
            "sampling.interruption_budget=0", "reward.kind=neg_entropy", f"train.out_dir={tmp_path}",
            "log.progress=none", "pipeline.mode=async", "pipeline.backend=ray", "pipeline.workers=2",
            "pipeline.max_lag=1", "pipeline.ray_num_cpus=2", "pipeline.timeout_s=600"]


def test_ray_trainer_actor_run_distils_and_shuts_down_cleanly(over, tmp_path):
    """One Ray run (a cluster start costs most of this test, so one run covers both): the trainer actor
    trains on lagged rollouts and, with loss.name=opd mixed with the verifier's surrogate
    (loss.reward_coef=1), loads the teacher itself (the generators sample the student only) and scores
    it in its micro-batches; then no Ray process is left."""
    from rlvr.train.launch import run_training

    assert not ray.is_initialized()
    tok = CharTokenizer()
    torch.manual_seed(1)
    save_policy(TinyGPT(load_config("quickstart", over[:3]).model, tok.vocab_size), tok, tmp_path / "teacher")
    cfg = load_config("quickstart", [*over, "train.steps=3", "loss.name=opd", f"loss.teacher={tmp_path / 'teacher'}",
                                     "loss.reward_coef=1.0", "algo.zero_var_filter=false"])
    run = run_training(cfg, run_dir=tmp_path / "run")
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert all(r["lag_max"] <= 1 and sum(r["lag_hist"].values()) == 16 for r in rows)
    assert all("samples_per_s" in r and "trainer_idle_s" in r for r in rows)
    assert all(r["distill_kl"] > 0 for r in rows)
    assert (run / "checkpoints" / "step_000003").exists()
    _assert_no_ray_left()


def test_killed_generator_actor_is_replaced(over):
    from rlvr.train.loop import build_policy, build_state, make_source
    from rlvr.train.step import rl_step

    cfg = load_config("quickstart", [*over, "pipeline.ray_trainer_actor=false", "pipeline.workers=1"])
    st = build_state(cfg, *build_policy(cfg, "none"))
    source, sharding = make_source(st)  # starts a local Ray instance in this (driver) process
    step = lambda st, n: rl_step(st, n, source, sharding)  # noqa: E731
    try:
        assert ray.is_initialized() and _ray_processes()  # the check below can see them
        m1 = step(st, 4)
        backend = source.backend
        victim = backend.actors[0]
        pid = ray.get(victim.pid.remote(), timeout=60)
        ray.kill(victim, no_restart=True)
        ms = [step(st, 4) for _ in range(3)]
        assert m1["lag_max"] == 0 and all(m["lag_max"] <= 1 for m in ms)
        assert ms[-1]["worker_restarts"] >= 1 and len(backend.actors) >= 2
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    finally:
        source.close()
    _assert_no_ray_left()
