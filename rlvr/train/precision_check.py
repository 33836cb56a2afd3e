"""``model.dtype: auto`` re-validated by the run's own steps: the first :data:`TIMED_STEPS` RL steps
after the first (which warms up) are timed in the precision the run computes in, and their median
recorded for this machine (:func:`rlvr.model.precision_cache.record_steps`), where it can overturn
the probe's cached choice for later runs. The run itself keeps its precision (its numerics are
decided before its first step)."""

from __future__ import annotations

import torch

from rlvr.config import RunConfig
from rlvr.model.precision import Precision, config_spec, step_shape
from rlvr.model.precision_cache import cache_key, cache_path, record_steps

TIMED_STEPS = 5


def run_shape(cfg: RunConfig) -> dict:
    """The RL step shape of ``cfg`` that real-step records are kept for."""
    return step_shape(cfg.algo.prompts_per_step, cfg.algo.group_size, cfg.sampling.max_new_tokens)


def checked_workload(cfg: RunConfig, precision: Precision, device: str | torch.device) -> dict | None:
    """The workload whose real steps this run records: on the CPU, the one ``auto`` measured, or,
    for an explicit dtype, the model's where ``auto`` has measured it on this machine before (so a
    float32 run can overturn a bfloat16 choice); None otherwise (a GPU, a pinned ``auto``)."""
    if torch.device(device).type != "cpu":
        return None
    if precision.workload is not None:
        return precision.workload
    if precision.requested == "auto":
        return None
    spec = config_spec(cfg.model)
    return spec if spec and cache_path(cache_key(spec)).exists() else None


class StepTimer:
    """Collects the first real steps' seconds (``gen_s + train_s`` of each metrics line) and records
    them once (:meth:`add` returns what was recorded, in words, that once; '' otherwise)."""

    def __init__(self, spec: dict, shape: dict, dtype: str, probe: dict | None):
        self.spec, self.shape, self.dtype, self.probe = spec, shape, dtype, probe
        self.seen, self.times, self.done = 0, [], False

    def add(self, metrics: dict) -> str:
        self.seen += 1
        if self.done or self.seen == 1:  # the first step warms up (allocations, thread pool)
            return ""
        self.times.append(float(metrics["gen_s"]) + float(metrics["train_s"]))
        if len(self.times) < TIMED_STEPS:
            return ""
        self.done = True
        return record_steps(self.spec, self.shape, self.dtype, self.times, self.probe)


def step_timer(cfg: RunConfig, precision: Precision, device: str | torch.device) -> StepTimer | None:
    """A :class:`StepTimer` for this run, or None when it records nothing (:func:`checked_workload`)."""
    spec = checked_workload(cfg, precision, device)
    return None if spec is None else StepTimer(spec, run_shape(cfg), precision.dtype, precision.measurement)
