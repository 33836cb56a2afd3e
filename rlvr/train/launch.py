"""Where a training run executes: in this process, or (``pipeline.backend=ray`` with
``pipeline.ray_trainer_actor``) inside a Ray trainer actor that runs the same
:func:`rlvr.train.loop.train`, so that trainer, generators and verifier are all Ray actors.

``rlvr run`` and ``rlvr train`` call :func:`run_training`; ``rlvr distributed`` (one process per
rank, synchronous) and the cells of ``rlvr reproduce`` call :func:`rlvr.train.loop.train` directly,
in this process. The loop itself never starts a trainer actor.
"""

from __future__ import annotations

import os
from pathlib import Path

from rlvr.config import RunConfig, dump_yaml
from rlvr.paths import atomic_write, claim_new_dir
from rlvr.train.loop import new_run_dir, train
from rlvr.train.ray_backend import _ray, actor_cpus, ensure_ray
from rlvr.train.resume import saved_config
from rlvr.train.validate import validate


class TrainerActor:
    """Actor: runs :func:`rlvr.train.loop.train` (which builds the pipeline from inside Ray)."""

    def run(self, cfg, run_dir: str, resume: bool, progress: str | None, extra_steps: int | None) -> str:
        if resume:
            return str(train(resume=run_dir, progress=progress, extra_steps=extra_steps))
        return str(train(cfg, run_dir=run_dir, progress=progress, overwrite=None))  # claimed by the driver

    def pid(self) -> int:
        return os.getpid()


def in_trainer_actor(cfg: RunConfig) -> bool:
    """Whether a run of ``cfg`` trains inside a Ray trainer actor."""
    return cfg.pipeline.mode == "async" and cfg.pipeline.backend == "ray" and cfg.pipeline.ray_trainer_actor


def run_training(cfg: RunConfig | None = None, run_dir: str | Path | None = None, resume: str | Path | None = None,
                 progress: str | None = None, extra_steps: int | None = None, overwrite: bool = False) -> Path:
    """Train (or resume) a run where its config says; returns the run directory. A non-empty
    ``run_dir`` is refused unless ``overwrite`` (:func:`rlvr.paths.claim_new_dir`)."""
    if resume is not None:
        run = Path(resume)
        cfg = saved_config(run)
    if not in_trainer_actor(cfg):
        return train(cfg if resume is None else None, run_dir=run_dir, resume=resume, progress=progress,
                     extra_steps=extra_steps, overwrite=overwrite)
    if resume is None:
        validate(cfg)
        run = Path(run_dir) if run_dir else new_run_dir(cfg)
        claim_new_dir(run, overwrite)
        atomic_write(run / "config.yaml", dump_yaml(cfg))
    ray = _ray()
    started = ensure_ray(cfg.pipeline)
    try:
        actor = ray.remote(num_cpus=actor_cpus(cfg.pipeline, "trainer"))(TrainerActor).remote()
        return Path(ray.get(actor.run.remote(cfg, str(run), resume is not None, progress or "plain", extra_steps)))
    finally:
        if started:
            ray.shutdown()
