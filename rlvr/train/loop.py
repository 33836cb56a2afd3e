"""The RL training loop: build the state, run steps, evaluate, checkpoint, resume.

Read :func:`train` top to bottom; one step is :func:`rlvr.train.step.rl_step`, fed by the source
that :func:`make_source` picks (sync, async pipeline, data parallel).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from pathlib import Path

import torch

from rlvr.config import RunConfig, dump_yaml
from rlvr.errors import UserError
from rlvr.log import MetricsLog, Progress, warn
from rlvr.machine import machine_info
from rlvr.model.io import resolve_device
from rlvr.paths import RUN_CONFIG, atomic_write, claim_new_dir
from rlvr.rewards.verify import verify_all
from rlvr.rollout.engine import sample
from rlvr.tasks.environment import environments_for
from rlvr.train.checkpoint import latest_good_checkpoint, remove_partial, save_checkpoint
from rlvr.train.distributed import LAUNCH, DataParallelSharding, DataParallelSource, from_rank0, rank_world
from rlvr.train.pipeline import LocalBackend, Pipeline
from rlvr.train.precision_check import step_timer
from rlvr.train.ray_backend import RayBackend
from rlvr.train.resume import check_fits, restore, saved_config, steps_target
from rlvr.train.state import TrainState, build_policy, build_state, fitting_problems, resolve_precision
from rlvr.train.step import LOCAL, BatchSource, Sharding, SyncSource, rl_step
from rlvr.train.validate import validate

__all__ = ["build_policy", "build_state", "heldout_pass_rate", "make_source", "new_run_dir", "train", "validate"]


def make_source(st: TrainState) -> tuple[BatchSource, Sharding]:
    """The step's batch source and sharding for the configured schedule: the sync step, data
    parallel (under torchrun), or the async pipeline on the local or Ray backend."""
    pc = st.cfg.pipeline
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        if rank_world()[1] == 1:
            raise UserError(f"WORLD_SIZE > 1 but no process group; launch data parallel with `{LAUNCH}`")
        return DataParallelSource(st), DataParallelSharding(pc.bucket_mb)
    if pc.mode == "sync":
        return SyncSource(), LOCAL
    return Pipeline(st, RayBackend(st) if pc.backend == "ray" else LocalBackend(st)), LOCAL


def heldout_pass_rate(st: TrainState, n_problems: int, seed: int, samples: int = 1) -> float:
    """Held-out pass@1: the mean correctness of ``samples`` samples per problem at the training
    temperature (own RNG stream, so evaluating does not change the training trajectory)."""
    problems = fitting_problems(st.task.problems("heldout", n_problems), st.model, st.tok, st.params,
                                None, "heldout")
    rows = [p for p in problems for _ in range(samples)]
    gen = torch.Generator().manual_seed(seed)
    rb = sample(st.model, st.tok, [p.prompt for p in rows], st.params, version=st.version, generator=gen,
                environments=environments_for(st.task, rows, st.params), problems=rows)
    verdicts = verify_all(st.task, rb.texts, rows, failure_value=st.cfg.train.reward_failure_value,
                          timeout_s=st.cfg.reward.timeout_s)
    return sum(v.correct for v in verdicts) / max(1, len(verdicts))


def new_run_dir(cfg: RunConfig) -> Path:
    """A new, unused ``train.out_dir/<name>-<timestamp>`` path (not created)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    d = Path(cfg.train.out_dir) / f"{cfg.name}-{stamp}"
    i = 1
    while d.exists():
        d = Path(cfg.train.out_dir) / f"{cfg.name}-{stamp}-{i}"
        i += 1
    return d


def _log_line(log: MetricsLog, m: dict) -> None:
    """Append the metrics line; a failed write (disk full) becomes a one-line UserError."""
    try:
        log.write(m)
    except OSError as e:
        raise UserError(f"could not append to {log.path} ({e.strerror or e}); checkpoints up to the last one "
                        "are intact; free disk space and resume with --resume") from None


def train(cfg: RunConfig | None = None, run_dir: str | Path | None = None, resume: str | Path | None = None,
          progress: str | None = None, extra_steps: int | None = None,
          source: BatchSource | None = None, sharding: Sharding | None = None,
          overwrite: bool | None = False, stop_at: float | None = None) -> Path:
    """Run (or resume) an RL run in this process; returns its directory. ``resume`` continues the
    run in that directory from its last good checkpoint, with the config saved there (``extra_steps``:
    a new step target, recorded beside it: :func:`rlvr.train.resume.steps_target`). ``overwrite``
    (False: refused; True: emptied first, saying what it removes; None: no check, for callers that
    manage the folder themselves): what
    happens to a non-empty ``run_dir`` (:func:`rlvr.paths.claim_new_dir`).
    ``source`` / ``sharding`` override :func:`make_source` (tests). ``stop_at``: a ``time.time()``
    deadline; the first step ending past it is checkpointed and the run returns unfinished (its last
    checkpoint below ``train.steps``), to be continued by ``resume`` exactly where it stopped."""
    if resume is not None:
        run = Path(resume)
        cfg = saved_config(run)  # exactly the config the run started with; config.yaml is not rewritten
        validate(cfg)
        check_fits(run, cfg)  # before any model is built: another run's config.yaml fails here
        cfg = steps_target(run, cfg, extra_steps, record=rank_world()[0] == 0)
    else:
        validate(cfg)  # a typo must fail in the first second, before any pretraining
        run = Path(run_dir) if run_dir else new_run_dir(cfg)
        if overwrite is not None:
            claim_new_dir(run, overwrite)
        run.mkdir(parents=True, exist_ok=True)
    cfg, precision = from_rank0(lambda: resolve_precision(cfg))  # model.dtype auto -> float32 | bfloat16
    if resume is None:
        atomic_write(run / RUN_CONFIG, dump_yaml(cfg))  # a kill here must not leave a torn config
    machine = machine_info(precision.dtype, resolve_device(cfg.train.device))
    machine["precision_reason"] = precision.reason  # the numbers behind the printed line (ratios, cache file)
    atomic_write(run / "machine.json", json.dumps(machine, indent=1))  # the machine of the latest (re)start
    if rank_world()[0] == 0:
        print(precision.line(), file=sys.stderr, flush=True)
    timer = step_timer(cfg, precision, resolve_device(cfg.train.device)) if rank_world()[0] == 0 else None
    mode = progress or cfg.log.progress
    model, tok = build_policy(cfg, mode)
    st = build_state(cfg, model, tok)
    start = 0
    if resume is not None:
        for d in remove_partial(run):
            warn(f"removed {d.name}: a checkpoint write interrupted by a crash")
        ckpt = latest_good_checkpoint(run)
        if ckpt is not None:
            restore(ckpt, st, run / RUN_CONFIG)
            start = st.step
        if start >= cfg.train.steps:
            warn(f"resume of {run}: the last checkpoint is at step {start} and train.steps={cfg.train.steps}, "
                 "so zero steps would run; raise train.steps (e.g. `--steps N`)")
            return run
    if source is None:
        source, sharding = make_source(st)
    lc = cfg.log
    wandb = dict(project=lc.wandb_project, name=lc.wandb_name, entity=lc.wandb_entity, group=lc.wandb_group,
                 tags=lc.wandb_tags, mode=lc.wandb_mode) if lc.wandb else None
    log = MetricsLog(run, lc.tensorboard, wandb, config=dataclasses.asdict(cfg),
                     truncate_after=start if resume else None, mlflow=lc.mlflow_experiment if lc.mlflow else None)
    bar = Progress(cfg.train.steps, cfg.name, mode, cfg.log.every, start=start)
    try:
        while st.step < cfg.train.steps:
            m = rl_step(st, cfg.train.steps, source, sharding or LOCAL)
            if timer is not None and (said := timer.add(m)):  # auto re-validated by the real steps
                print(f"precision: {said}", file=sys.stderr, flush=True)
            if st.last_entropy is not None:  # observed entropy change, beside the predicted dH_total
                m["entropy_obs_change"] = m["entropy"] - st.last_entropy
            st.last_entropy = m["entropy"]
            every = cfg.train.eval_every
            if (every and st.step % every == 0) or st.step == cfg.train.steps or st.step == 1:
                m["heldout_pass_rate"] = heldout_pass_rate(st, cfg.train.eval_problems, cfg.train.seed + 7,
                                                            cfg.train.eval_samples)
            if st.nan_steps >= cfg.train.max_nan_steps:
                _log_line(log, m)
                raise UserError(f"stopping: {st.nan_steps} steps had NaN/Inf loss or gradients "
                                f"(train.max_nan_steps={cfg.train.max_nan_steps}); lower optim.lr")
            _log_line(log, m)  # before the checkpoint: a resume truncates to the checkpoint's step
            ms = cfg.train.milestone_every
            milestone = bool(ms) and st.step % ms == 0
            pause = stop_at is not None and time.time() > stop_at and st.step < cfg.train.steps
            if st.step % cfg.train.checkpoint_every == 0 or st.step == cfg.train.steps or milestone or pause:
                save_checkpoint(run, st, cfg.train.keep_last, milestone=milestone)
            bar.update(1, **m)
            if pause:
                warn(f"{run}: paused at step {st.step} of {cfg.train.steps} (its time budget); "
                     "resuming continues from this checkpoint")
                break
    finally:
        source.close()
        bar.close()
        try:
            log.close()
        except OSError:  # only a line whose write already failed (and was reported) is pending
            pass
    atomic_write(run / "train_summary.json", json.dumps({"steps": st.step, "counters": st.counters,
                                                          "wall_s": st.wall_s, "machine": machine}, indent=1))
    return run
