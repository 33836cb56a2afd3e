"""Data-parallel training through ``torch.distributed`` (gloo on CPU, NCCL on GPU), launched by
torchrun (:mod:`rlvr.commands.distributed`)::

    torchrun --nproc_per_node=2 -m rlvr.commands.distributed quickstart train.steps=20

The step is :func:`rlvr.train.step.rl_step` with two pieces of this module:

- :class:`DataParallelSource`: every rank draws the same P prompts (same seeded data order),
  samples and scores its share of them (prompts ``rank::world``, sampling stream ``rank``), and the
  scored groups are all-gathered so that every rank holds the same global batch.
- :class:`DataParallelSharding`: in each mini-batch the loss weights are computed on the whole
  (global) mini-batch, each rank back-propagates its contiguous share of rows, and gradients and
  statistics are SUMMED over ranks. Because the normaliser is global, each rank's gradient is its
  share of the global gradient, so the sum is the single-process gradient (DDP averages instead,
  because its per-rank losses are normalised locally). The result equals a single process on the
  same batch up to float summation order; with one rank it is the sync step exactly.

Rank 0 writes the run directory; rank r > 0 writes ``RUN/ranks/rank<r>`` (its own metrics and
checkpoints, so every rank resumes from its own copy). For models too big for one device, wrap
the model with ``torch.distributed.fsdp.FullyShardedDataParallel`` before building the
optimiser (optional, not needed for the tiny model; not wired in).
"""

from __future__ import annotations

import datetime
import os

import torch
import torch.distributed as dist

from rlvr.errors import UserError
from rlvr.train.state import TrainState, sampling_generator
from rlvr.train.step import Collected, Sharding, rollout
from rlvr.train.weights import bucket_layout, pack, unpack_into
from rlvr.types import ScoredBatch

LAUNCH = "torchrun --nproc_per_node=N -m rlvr.commands.distributed CONFIG [overrides]"


# ----------------------------------------------------------------------------- process group
def rank_world() -> tuple[int, int]:
    """(rank, world size) of the initialised process group, (0, 1) without one."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def from_rank0(make):
    """``make()`` computed on rank 0 and broadcast to every rank (one decision for all, e.g. the
    measured precision); without a process group just ``make()``."""
    rank, world = rank_world()
    if world == 1:
        return make()
    box = [make() if rank == 0 else None]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def init_from_env(timeout_s: float = 300.0, backend: str | None = None) -> tuple[int, int]:
    """Initialise the process group from torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR,
    MASTER_PORT); gloo on CPU, NCCL when CUDA is available. Every collective times out after
    ``timeout_s`` (raises instead of hanging)."""
    if dist.is_initialized():
        return rank_world()
    if "WORLD_SIZE" not in os.environ:
        raise UserError("data parallel needs torchrun's environment (WORLD_SIZE unset); launch with "
                        f"`{LAUNCH}`")
    backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout_s))
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    return rank_world()


def allreduce_grads(params: list[torch.Tensor], bucket_bytes: int = 32 << 20) -> None:
    """Sum every parameter's gradient over ranks, bucket by bucket (a missing grad counts as 0)."""
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    layout = bucket_layout(grads, bucket_bytes)
    buckets = pack(grads, layout)
    for b in buckets:
        dist.all_reduce(b, op=dist.ReduceOp.SUM)
    for p, g in zip(params, grads):
        if p.grad is None:
            p.grad = g
    unpack_into([p.grad for p in params], layout, buckets)


def sum_over_ranks(stats: dict[str, float]) -> dict[str, float]:
    """Every rank's ``stats`` summed key by key (keys missing on a rank count as 0)."""
    _, world = rank_world()
    every: list[dict] = [{} for _ in range(world)]
    dist.all_gather_object(every, stats)
    out: dict[str, float] = {}
    for s in every:
        for k, v in s.items():
            out[k] = out.get(k, 0.0) + v
    return out


class DataParallelSharding(Sharding):
    """Rank r back-propagates ``rows.tensor_split(world)[r]`` of each mini-batch; gradients and
    statistics are summed over ranks."""

    def __init__(self, bucket_mb: int = 32):
        self.rank, self.world = rank_world()
        self.bucket_bytes = bucket_mb << 20

    def rows(self, rows: torch.Tensor) -> torch.Tensor:
        return torch.arange(len(rows)).tensor_split(self.world)[self.rank]

    def reduce_grads(self, params: list[torch.Tensor]) -> None:
        allreduce_grads(params, self.bucket_bytes)

    def reduce_stats(self, stats: dict[str, float]) -> dict[str, float]:
        return sum_over_ranks(stats)


class DataParallelSource:
    """Every rank samples and scores its share of the step's prompts; all ranks get the whole batch."""

    def __init__(self, st: TrainState):
        if st.cfg.algo.dynamic_sampling:
            raise UserError("algo.dynamic_sampling is not supported with data parallel; set it to false")
        if st.cfg.pipeline.mode == "async":
            raise UserError("data parallel runs the synchronous step; set pipeline.mode=sync")
        if st.cfg.sampling.engine == "vllm":
            raise UserError("data parallel does not run the vLLM engine (one engine per rank on one GPU, "
                            "weights synced rank by rank: not wired in); set sampling.engine=native")
        self.rank, self.world = rank_world()

    def collect(self, st: TrainState) -> Collected:
        problems = st.next_problems(st.cfg.algo.prompts_per_step)  # identical on every rank
        mine = problems[self.rank :: self.world]
        gen = sampling_generator(st.cfg.train.seed, st.step, self.rank)
        part = rollout(st, mine, gen, f"step {st.step + 1}, rank {self.rank}") if mine else None
        parts: list = [None] * self.world
        dist.all_gather_object(parts, part)
        batch = ScoredBatch.concat([q for q in parts if q is not None], st.tok.pad_id)
        return Collected(batch, batch, batch.size, batch.rollouts.n_tokens, {"world_size": self.world})

    def after_update(self, st: TrainState, got: Collected) -> dict:
        return {}

    def close(self) -> None:
        pass
