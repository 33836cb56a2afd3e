"""How a run executes: the ``train`` (steps, evaluation, checkpoints, device), ``pipeline`` (sync or
async, workers, Ray) and ``log`` sections."""

from __future__ import annotations

import re
from dataclasses import dataclass

from rlvr.config.checks import FINITE, NON_NEGATIVE, POSITIVE, RANGES, UNIT, at_least, check, check_section_ranges


@dataclass(frozen=True)
class TrainConfig:
    steps: int = 60
    """RL steps."""
    eval_every: int = 10
    """Held-out pass@1 every this many steps (0 = only at the end)."""
    eval_problems: int = 200
    """Held-out problems for the periodic evaluation."""
    eval_samples: int = 1
    """Samples per problem in the periodic evaluation (its pass@1 averages them: less noise for curve fits)."""
    final_eval_samples: int = 16
    """Samples per problem in the final base-vs-trained evaluation (pass@k up to this k)."""
    checkpoint_every: int = 20
    """Checkpoint every this many steps (and at the end)."""
    keep_last: int = 2
    """Rolling checkpoints to keep (milestones are kept too; 0 = keep every checkpoint)."""
    milestone_every: int = 0
    """Also write a checkpoint at every multiple of this step and keep it, never pruned (0 = none)."""
    seed: int = 0
    """Seed of sampling, data order and initialisation."""
    deterministic: bool = False
    """Deterministic algorithms and one thread, for bit-exact resume tests."""
    device: str = "auto"
    """Where the policy trains and samples: auto (CUDA GPU if visible, else CPU) | cpu | cuda | cuda:N."""
    out_dir: str = "runs"
    """Parent folder of run directories."""
    max_nan_steps: int = 3
    """Stop the run after this many steps with NaN/Inf loss or gradients."""
    reward_failure_value: float = 0.0
    """Reward given to a sample whose reward function raised or timed out."""
    max_reward_failure_rate: float = 0.5
    """Stop the run when more than this share of a step's rewards failed."""
    entropy_probe: int = 0
    """Observe the entropy change of every update (0 = off): the update's own batch before and after
    each optimiser update, and a fixed probe batch of this many held-out problems (one sample each,
    drawn once by the starting policy) before and after each step's updates; logged as ``dH_obs_*`` and
    ``probe_entropy_*`` (docs/methods/losses.md, "Observed entropy change"). Training numerics are unchanged."""

    def __post_init__(self):
        check_section_ranges(self, "train")
        check(DEVICE_PATTERN.fullmatch(self.device) is not None, "train.device",
              f"{self.device!r} is not a device; use auto, cpu, cuda or cuda:N")


DEVICE_PATTERN = re.compile(r"auto|cpu|cuda(:\d+)?")
"""Valid ``train.device`` values."""

RANGES["train"] = {
    "steps": at_least(1), "eval_every": NON_NEGATIVE, "eval_problems": at_least(1), "eval_samples": at_least(1),
    "final_eval_samples": at_least(1), "checkpoint_every": at_least(1), "keep_last": NON_NEGATIVE,
    "milestone_every": NON_NEGATIVE, "seed": NON_NEGATIVE, "max_nan_steps": at_least(1),
    "reward_failure_value": FINITE, "max_reward_failure_rate": UNIT, "entropy_probe": NON_NEGATIVE,
}


@dataclass(frozen=True)
class PipelineConfig:
    mode: str = "sync"
    """sync (generate then train) | async (PipelineRL-style)."""
    max_lag: int = 2
    """Async: most policy versions (trainer steps) a consumed sample may be behind (k; 0 = no overlap)."""
    workers: int = 1
    """Async: generator workers."""
    backend: str = "local"
    """local (generator threads in this process) | ray (generators, verifier, trainer as Ray actors)."""
    chunk_groups: int = 0
    """Async: prompt groups per generation call of a worker (0 = ceil(P / workers))."""
    sync_every: int = 8
    """Async: decoding steps between checks for new weights (in-flight update)."""
    timeout_s: float = 300.0
    """Async/data parallel: longest wait on a queue, weight sync, worker call or collective before raising."""
    max_restarts: int = 2
    """Async: restarts of a crashed generator worker before the run stops with its error."""
    bucket_mb: int = 32
    """Weight sync and gradient all-reduce: bucket size in MiB (parameters are copied bucket by bucket)."""
    ray_address: str = ""
    """Ray backend: address of an existing cluster, or "auto"; "" = the RAY_ADDRESS environment variable
    when set, else start a local instance."""
    ray_num_cpus: int = 2
    """Ray backend: CPUs of the local instance it starts."""
    ray_trainer_actor: bool = True
    """Ray backend: run the trainer as a Ray actor too (false: in the driver process)."""

    def __post_init__(self):
        check_section_ranges(self, "pipeline")
        check(self.mode in ("sync", "async"), "pipeline.mode", "use sync or async")
        check(self.backend in ("local", "ray"), "pipeline.backend", "use local or ray")


RANGES["pipeline"] = {
    "max_lag": NON_NEGATIVE, "workers": at_least(1), "chunk_groups": NON_NEGATIVE, "sync_every": at_least(1),
    "timeout_s": POSITIVE, "max_restarts": NON_NEGATIVE, "bucket_mb": at_least(1), "ray_num_cpus": at_least(1),
}


@dataclass(frozen=True)
class LogConfig:
    progress: str = "auto"
    """auto (bar on a terminal, lines otherwise) | bar | plain | none."""
    every: int = 1
    """Plain mode: print a line every this many steps."""
    tensorboard: bool = False
    """Write TensorBoard events (needs tensorboard installed)."""
    wandb: bool = False
    """Log to Weights & Biases (needs wandb installed; ``log.wandb_mode=offline`` works without network)."""
    wandb_project: str = "rlvr"
    """W&B project."""
    wandb_name: str = ""
    """W&B run name ("" = the run directory's name)."""
    wandb_entity: str = ""
    """W&B entity (team or user; "" = your default)."""
    wandb_group: str = ""
    """W&B group ("" = none), e.g. to gather the seeds of one sweep."""
    wandb_tags: tuple[str, ...] = ()
    """W&B tags."""
    wandb_mode: str = ""
    """online | offline | disabled; "" = WANDB_MODE from the environment, else online."""
    mlflow: bool = False
    """Log to MLflow (needs mlflow installed; MLFLOW_TRACKING_URI chooses the server, default ./mlruns)."""
    mlflow_experiment: str = "rlvr"
    """MLflow experiment name."""

    def __post_init__(self):
        check_section_ranges(self, "log")
        check(self.progress in PROGRESS_MODES, "log.progress",
              f"unknown {self.progress!r}; use {' | '.join(PROGRESS_MODES)}")
        check(self.wandb_mode in ("", *WANDB_MODES), "log.wandb_mode",
              f"unknown {self.wandb_mode!r}; use {' | '.join(WANDB_MODES)} or \"\" (WANDB_MODE, else online)")


PROGRESS_MODES = ("auto", "bar", "plain", "none")
WANDB_MODES = ("online", "offline", "disabled")
RANGES["log"] = {"every": at_least(1)}

