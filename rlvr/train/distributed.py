"""Moving parameters between copies of a model: bucketed weight sync, and data-parallel training.

Buckets: parameters are copied as a few large flat tensors (one dtype each, at most
``pipeline.bucket_mb`` MiB) instead of one tensor at a time; the async pipeline publishes
weights this way and data parallel all-reduces gradients this way.

Data parallel through ``torch.distributed`` (gloo on CPU, NCCL on GPU), launched by torchrun::

    torchrun --nproc_per_node=2 -m rlvr.train.distributed quickstart train.steps=20

One step (:func:`dp_rl_step`): every rank draws the same P prompts (same seeded data order),
samples and scores its share of them (prompts ``rank::world``), and the scored rollouts are
all-gathered so that every rank holds the same global batch. In each mini-batch the loss weights
are computed on the whole (global) mini-batch, each rank back-propagates its contiguous shard of
rows, and the gradients are all-reduced. Because the normaliser is global, each rank's gradient
is its share of the global gradient, so the all-reduce SUMS them; that is DDP's average over
ranks of ``world x share`` (DDP averages because its per-rank losses are normalised locally).
The result equals a single process on the same batch up to float summation order.
Rank 0 writes the run directory; rank r > 0 writes ``RUN/ranks/rank<r>`` (its own metrics and
checkpoints, so every rank resumes from its own copy). For models too big for one device, wrap
the model with ``torch.distributed.fsdp.FullyShardedDataParallel`` before building the
optimiser (optional, not needed for the tiny model; not wired in).
"""

from __future__ import annotations

import argparse
import copy
import datetime
import os
import threading
import time

import torch

from rlvr.errors import UserError


class PipelineError(RuntimeError):
    """The async pipeline cannot go on (a worker crashed for good, a wait timed out)."""


class PipelineTimeout(PipelineError, TimeoutError):
    """A queue wait, weight sync or worker call took longer than ``pipeline.timeout_s``."""


# ----------------------------------------------------------------------------- buckets
def bucket_layout(tensors: list[torch.Tensor], bucket_bytes: int) -> list[list[int]]:
    """Indices of ``tensors`` grouped into buckets: same dtype, at most ``bucket_bytes`` each
    (a single larger tensor gets a bucket of its own). Deterministic given shapes and dtypes."""
    layout: list[list[int]] = []
    size, dtype = 0, None
    for i, t in enumerate(tensors):
        nbytes = t.numel() * t.element_size()
        if not layout or t.dtype != dtype or size + nbytes > bucket_bytes:
            layout.append([])
            size, dtype = 0, t.dtype
        layout[-1].append(i)
        size += nbytes
    return layout


def pack(tensors: list[torch.Tensor], layout: list[list[int]]) -> list[torch.Tensor]:
    """One flat tensor per bucket (copies, detached)."""
    return [torch.cat([tensors[i].detach().reshape(-1) for i in idx]) for idx in layout]


def unpack_into(tensors: list[torch.Tensor], layout: list[list[int]], buckets: list[torch.Tensor]) -> None:
    """Copy the flat ``buckets`` back into ``tensors`` in place (inverse of :func:`pack`)."""
    if len(buckets) != len(layout):
        raise ValueError(f"weight sync: {len(buckets)} buckets for a layout of {len(layout)}")
    with torch.no_grad():
        for idx, flat in zip(layout, buckets):
            off = 0
            for i in idx:
                n = tensors[i].numel()
                tensors[i].copy_(flat[off : off + n].view_as(tensors[i]))
                off += n


def parameters_of(model: torch.nn.Module) -> list[torch.Tensor]:
    """The model's parameters in a fixed order (tied weights once)."""
    return list(model.parameters())


class WeightStore:
    """The latest published weights as flat buckets: the trainer writes, generators copy (threads).

    A lock guards each publish and pull, so a generator never sees half a version; every wait on
    it is bounded by ``timeout_s`` (a stuck sync raises :class:`PipelineTimeout`).
    """

    def __init__(self, model: torch.nn.Module, version: int, bucket_mb: int = 32, timeout_s: float = 300.0):
        params = parameters_of(model)
        self.layout = bucket_layout(params, bucket_mb << 20)
        self.buckets = pack(params, self.layout)
        self.version, self.timeout_s = version, timeout_s
        self._lock = threading.Lock()

    def _acquire(self, what: str) -> None:
        if not self._lock.acquire(timeout=self.timeout_s):
            raise PipelineTimeout(f"weight sync ({what}) waited {self.timeout_s:.0f}s for the weight lock; "
                                  "a publisher or reader is stuck")

    def publish(self, model: torch.nn.Module, version: int) -> None:
        params = parameters_of(model)
        self._acquire("publish")
        try:
            with torch.no_grad():
                for idx, flat in zip(self.layout, self.buckets):  # bucket by bucket
                    flat.copy_(torch.cat([params[i].detach().reshape(-1) for i in idx]))
            self.version = version
        finally:
            self._lock.release()

    def pull(self, model: torch.nn.Module, have: int) -> int | None:
        """Copy the published weights into ``model`` if newer than ``have``; the new version or None."""
        if self.version <= have:
            return None
        self._acquire("pull")
        try:
            unpack_into(parameters_of(model), self.layout, self.buckets)
            return self.version
        finally:
            self._lock.release()


# ----------------------------------------------------------------------------- process group
def rank_world() -> tuple[int, int]:
    """(rank, world size) of the initialised process group, (0, 1) without one."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def init_from_env(timeout_s: float = 300.0, backend: str | None = None) -> tuple[int, int]:
    """Initialise the process group from torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR,
    MASTER_PORT); gloo on CPU, NCCL when CUDA is available. Every collective times out after
    ``timeout_s`` (raises instead of hanging)."""
    import torch.distributed as dist

    if dist.is_initialized():
        return rank_world()
    if "WORLD_SIZE" not in os.environ:
        raise UserError("data parallel needs torchrun's environment (WORLD_SIZE unset); launch with "
                        "`torchrun --nproc_per_node=N -m rlvr.train.distributed CONFIG [overrides]`")
    backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout_s))
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    return rank_world()


def allreduce_grads(params: list[torch.Tensor], bucket_bytes: int = 32 << 20) -> None:
    """Sum every parameter's gradient over ranks, bucket by bucket (a missing grad counts as 0)."""
    import torch.distributed as dist

    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    layout = bucket_layout(grads, bucket_bytes)
    buckets = pack(grads, layout)
    for b in buckets:
        dist.all_reduce(b, op=dist.ReduceOp.SUM)
    for p, g in zip(params, grads):
        if p.grad is None:
            p.grad = g
    unpack_into([p.grad for p in params], layout, buckets)


def _sum_stats(stats: dict[str, float]) -> dict[str, float]:
    import torch.distributed as dist

    _, world = rank_world()
    every: list[dict] = [{} for _ in range(world)]
    dist.all_gather_object(every, stats)
    out: dict[str, float] = {}
    for s in every:
        for k, v in s.items():
            out[k] = out.get(k, 0.0) + v
    return out


# ----------------------------------------------------------------------------- one DP step
def dp_policy_update(st, rb, adv_B: torch.Tensor, mask: torch.Tensor) -> dict:
    """:func:`rlvr.train.step.policy_update` with each mini-batch's rows split over ranks.

    Every rank holds the same global batch ``rb`` (B rows). Loss weights come from the whole
    mini-batch; rank r back-propagates rows ``rows.tensor_split(world)[r]``; gradients are
    summed over ranks before clipping and the optimiser step (identical on every rank).
    """
    from rlvr.algo import losses as L
    from rlvr.train.logprobs import score
    from rlvr.train.step import _clip_and_step, _micro_step, resolved_loss

    rank, world = rank_world()
    cfg, G = st.cfg, st.cfg.algo.group_size
    name, lcfg, aggregation, _ = resolved_loss(cfg)
    temp, n_groups = cfg.sampling.temperature, rb.size // G
    ref_logp = score(st.ref_model, rb, temp) if st.ref_model is not None else None
    micro = cfg.algo.micro_batch_size or rb.size
    p = st.params
    forced = len(p.interruption_ids) + p.interruption_extra if p.interruption_budget else 0
    max_len = max(p.max_new_tokens + forced, rb.completion_ids.shape[1])
    params = [q for q in st.model.parameters() if q.requires_grad]
    agg: dict[str, float] = {}
    n_updates = 0
    for epoch in range(cfg.algo.ppo_epochs):
        perm = torch.randperm(n_groups, generator=st.gen)  # same stream on every rank
        for mb_groups in perm.chunk(min(cfg.algo.minibatches, n_groups)):
            rows = (mb_groups[:, None] * G + torch.arange(G)).reshape(-1).sort().values
            w = L.token_weights(mask[rows], G, aggregation, max_len=max_len, adv_B=adv_B[rows])
            mine, w_mine = rows.tensor_split(world)[rank], w.tensor_split(world)[rank]
            st.opt.zero_grad(set_to_none=True)
            stats: dict[str, float] = {}
            for mrows, mw in zip(mine.split(micro), w_mine.split(micro)):
                s = _micro_step(st, rb, mrows, mw, rb.behaviour_logp, ref_logp, adv_B, mask, name, lcfg, temp,
                                diag=epoch == 0 and n_updates == 0 and len(stats) == 0)
                for k, v in s.items():
                    stats[k] = stats.get(k, 0.0) + v * len(mrows) / len(rows)
            allreduce_grads(params, cfg.pipeline.bucket_mb << 20)
            stats = _sum_stats(stats)
            stats["grad_norm"] = _clip_and_step(st)
            n_updates += 1
            for k, v in stats.items():
                agg[k] = agg.get(k, 0.0) + v
    return {k: v / max(1, n_updates) for k, v in agg.items()}


def dp_rl_step(st, total_steps: int) -> dict:
    """One data-parallel RL step (same metrics line as :func:`rlvr.train.step.rl_step`)."""
    import torch.distributed as dist

    from rlvr.rollout.engine import concat_batches
    from rlvr.train.pipeline import finish_step, learn
    from rlvr.train.schedule import lr_at
    from rlvr.train.step import rollout_metrics, rollout_round

    rank, world = rank_world()
    cfg, G, P = st.cfg, st.cfg.algo.group_size, st.cfg.algo.prompts_per_step
    if cfg.algo.dynamic_sampling:
        raise UserError("algo.dynamic_sampling is not supported with data parallel; set it to false")
    t0 = time.time()
    for g in st.opt.param_groups:
        g["lr"] = lr_at(st.step, cfg.optim.lr, cfg.optim.warmup_steps, total_steps, cfg.optim.schedule)
    retired = st.tracker.retired if st.tracker else frozenset()
    problems = st.data.next(P, retired)  # identical on every rank
    local = copy.copy(st)  # own sampling stream per (seed, step, rank): resumable without extra state
    local.gen = torch.Generator().manual_seed(cfg.train.seed * 1_000_003 + st.step * 1009 + rank)
    mine = problems[rank::world]
    part = rollout_round(local, mine) + (mine,) if mine else None
    parts: list = [None] * world
    dist.all_gather_object(parts, part)
    parts = [q for q in parts if q is not None]
    rb = concat_batches([q[0] for q in parts], st.tok.pad_id)
    verdicts = [v for q in parts for v in q[1]]
    reward_B = torch.cat([q[2] for q in parts])
    problems = [x for q in parts for x in q[4]]
    m = rollout_metrics(rb, verdicts, reward_B, G)
    m.update({k: v for k, v in parts[0][3].items() if v is not None})
    if st.tracker is not None:
        correct = torch.tensor([v.correct for v in verdicts], dtype=torch.float32).view(-1, G).sum(1)
        st.tracker.update([q.id for q in problems], correct.tolist(), [G] * len(problems))
        m["retired_prompts"] = len(st.tracker.retired)
    m.update(learn(st, rb, reward_B, update=dp_policy_update))
    gen_tokens = int(rb.completion_mask.sum() + rb.prompt_mask.sum())
    m.update(world_size=world, lag_max=0, lag_mean=0.0)
    return finish_step(st, m, rb.size, gen_tokens, time.time() - t0)


# ----------------------------------------------------------------------------- torchrun entry
def main(argv: list[str] | None = None) -> int:
    """torchrun entry point: ``-m rlvr.train.distributed CONFIG [overrides] [--run-dir D | --resume D]``."""
    import torch.distributed as dist

    from rlvr.config import load_config
    from rlvr.train.loop import new_run_dir, train

    ap = argparse.ArgumentParser(prog="rlvr.train.distributed", description="data-parallel RL training")
    ap.add_argument("config", nargs="?", default="quickstart")
    ap.add_argument("overrides", nargs="*")
    ap.add_argument("--run-dir")
    ap.add_argument("--resume", metavar="RUN_DIR")
    args = ap.parse_args(argv)
    cfg = load_config(args.config, args.overrides)
    rank, world = init_from_env(cfg.pipeline.timeout_s)
    try:
        if cfg.pipeline.mode == "async":
            raise UserError("data parallel runs the synchronous step; set pipeline.mode=sync")
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))
        root = [args.resume or args.run_dir or str(new_run_dir(cfg))]
        dist.broadcast_object_list(root, src=0)
        mine = root[0] if rank == 0 else os.path.join(root[0], "ranks", f"rank{rank}")
        mode = None if rank == 0 else "none"
        out = train(resume=mine, progress=mode) if args.resume else train(cfg, run_dir=mine, progress=mode)
        dist.barrier()
        if rank == 0:
            print(out)
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    import sys

    from rlvr.errors import UserError as _UserError

    try:
        sys.exit(main())
    except _UserError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
