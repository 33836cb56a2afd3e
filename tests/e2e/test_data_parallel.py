"""Data parallel (gloo, 2 processes): one step on the same global batch gives the parameters one
process gets; a short torchrun run keeps every rank's weights identical."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp

from rlvr.algo.losses import resolve_loss
from rlvr.config import load_config
from rlvr.model.tiny import TinyGPT
from rlvr.model.tokenizer import CharTokenizer
from rlvr.rollout.engine import sample, sample_params
from rlvr.train.state import TrainState
from rlvr.types import Problem, ScoredBatch, Verdict

OVER = ["model.n_layer=1", "model.d_model=32", "model.n_head=2", "algo.prompts_per_step=4",
        "algo.group_size=3", "algo.minibatches=2", "algo.micro_batch_size=2", "sampling.max_new_tokens=10",
        "sampling.interruption_budget=0", "optim.grad_clip=0"]


def _state_and_batch():
    """The same model, batch and advantages in every process (seeded)."""
    cfg = load_config("quickstart", OVER)
    tok = CharTokenizer()
    torch.manual_seed(0)
    model = TinyGPT(cfg.model, tok.vocab_size)
    params = sample_params(cfg.sampling, tok)
    prompts = [p for p in ["1+2=", "30-4=", "7*6=", "9+9="] for _ in range(3)]
    rb = sample(model, tok, prompts, params, generator=torch.Generator().manual_seed(3))
    adv_B = torch.randn(rb.size, generator=torch.Generator().manual_seed(4))
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    st = TrainState(cfg=cfg, model=model, tok=tok, task=None, opt=opt, data=None, params=params,
                    gen=torch.Generator().manual_seed(5), loss=resolve_loss(cfg.loss))
    zeros = torch.zeros(rb.size)
    batch = ScoredBatch(rb, [Verdict(0.0, "wrong")] * rb.size, zeros, zeros,
                        [Problem(str(i), "", "") for i in range(4)], 3)
    return st, batch, adv_B


def _rank_main(rank: int, world: int, store: str, out: str) -> None:
    import torch.distributed as dist

    from rlvr.train.distributed import DataParallelSharding
    from rlvr.train.step import policy_update

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    try:
        st, batch, adv_B = _state_and_batch()
        stats = policy_update(st, batch, adv_B, batch.rollouts.loss_mask, DataParallelSharding())
        torch.save({"params": [p.detach().clone() for p in st.model.parameters()], "stats": stats,
                    "version": st.version}, f"{out}/rank{rank}.pt")
        dist.barrier()  # as `rlvr distributed` does: no rank tears gloo down while the other is still in it
    finally:
        dist.destroy_process_group()


def _spawn(world: int, tmp: Path, timeout_s: float = 240.0) -> None:
    ctx = mp.start_processes(_rank_main, args=(world, str(tmp / "pg_store"), str(tmp)), nprocs=world,
                             join=False, start_method="spawn")
    deadline = time.monotonic() + timeout_s
    while not ctx.join(timeout=1.0):
        if time.monotonic() > deadline:
            for p in ctx.processes:
                p.kill()
            pytest.fail(f"data-parallel workers did not finish in {timeout_s}s")


def test_two_gloo_ranks_match_one_process_after_a_step(tmp_path):
    from rlvr.train.step import policy_update

    st, batch, adv_B = _state_and_batch()
    before = [p.detach().clone() for p in st.model.parameters()]
    stats = policy_update(st, batch, adv_B, batch.rollouts.loss_mask)
    _spawn(2, tmp_path)
    r0, r1 = torch.load(tmp_path / "rank0.pt"), torch.load(tmp_path / "rank1.pt")
    assert r0["version"] == r1["version"] == st.version == 2  # two mini-batches, two optimiser steps
    moved = max(float((p - b).abs().max()) for p, b in zip(st.model.parameters(), before))
    assert moved > 1e-3  # the step did something, so the tolerance below means something
    for single, a, b in zip(st.model.parameters(), r0["params"], r1["params"]):
        assert torch.equal(a, b)  # ranks agree exactly
        assert torch.allclose(single, a, atol=1e-6, rtol=0), float((single - a).abs().max())
    # no clipping (optim.grad_clip=0), so a wrong all-reduce factor shows in the parameters; the global
    # gradient norm and the logged loss (partial sums over rows, summed over ranks) match the single
    # process'. Token-mean stats such as clip fractions are row-weighted means of micro-batch means, so
    # they depend on how the rows are split and are not compared.
    assert r0["stats"]["grad_norm"] == pytest.approx(stats["grad_norm"], rel=1e-5)
    for key in ("loss", "policy_loss"):
        assert r0["stats"][key] == r1["stats"][key] == pytest.approx(stats[key], rel=1e-5, abs=1e-7), key


def test_torchrun_keeps_ranks_in_lockstep(tmp_path):
    from rlvr.model.io import save_policy

    tok = CharTokenizer()
    torch.manual_seed(0)
    cfg = load_config("quickstart", OVER)
    save_policy(TinyGPT(cfg.model, tok.vocab_size), tok, tmp_path / "init")
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           "-m", "rlvr.commands.distributed", "quickstart", *OVER, f"model.init_from={tmp_path / 'init'}",
           "task.train_size=32", "train.steps=2", "train.eval_problems=4", "reward.kind=neg_entropy",
           "pipeline.timeout_s=120", "--run-dir", str(run)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=400, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2] and all(r["world_size"] == 2 for r in rows)
    assert all(r["samples"] == 12 * r["step"] for r in rows)  # P*G rows per step across both ranks
    from safetensors.torch import load_file

    w0 = load_file(str(run / "checkpoints" / "step_000002" / "model.safetensors"))
    w1 = load_file(str(run / "ranks" / "rank1" / "checkpoints" / "step_000002" / "model.safetensors"))
    assert w0.keys() == w1.keys() and all(torch.equal(w0[k], w1[k]) for k in w0)
    m1 = [json.loads(x) for x in (run / "ranks" / "rank1" / "metrics.jsonl").read_text().splitlines()]
    assert [r["reward"] for r in m1] == [r["reward"] for r in rows]  # the same global batch on both
