"""The synchronous RL loop: build the state, run steps, evaluate, checkpoint, resume.

Read :func:`train` top to bottom; one step is :func:`rlvr.train.step.rl_step`.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch

from rlvr.config import RunConfig, dump_yaml, load_config
from rlvr.errors import UserError
from rlvr.log import MetricsLog, Progress, warn
from rlvr.rollout.engine import sample, sample_params, verify_all
from rlvr.train.checkpoint import latest_good_checkpoint, load_checkpoint_into, save_checkpoint
from rlvr.train.data import PromptSampler
from rlvr.train.step import TrainState


def build_policy(cfg: RunConfig, progress: str = "auto"):
    """(model, tokenizer): ``model.init_from`` if set, else the cached pretrained tiny base (or HF)."""
    from rlvr.model.io import load_policy

    if cfg.model.init_from:
        return load_policy(cfg.model.init_from)
    if cfg.model.kind == "hf":
        from rlvr.model.hf import load_hf_policy

        return load_hf_policy(cfg.model.path, cfg.model)
    from rlvr.train.pretrain import base_model

    return load_policy(base_model(cfg.model, cfg.pretrain, progress))


def get_task(cfg: RunConfig):
    from rlvr.tasks.registry import get_task as registry_get

    return registry_get(cfg.task.name, **cfg.task.knobs)


def build_state(cfg: RunConfig, model, tok) -> TrainState:
    if cfg.train.deterministic:
        torch.use_deterministic_algorithms(True)
        torch.set_num_threads(1)
    torch.manual_seed(cfg.train.seed)
    task = get_task(cfg)
    problems = task.problems("train", cfg.task.train_size or None)
    ref = None
    if cfg.loss.kl_coef > 0:  # a frozen reference only when the KL anchor is on
        import copy

        ref = copy.deepcopy(model).eval().requires_grad_(False)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=cfg.optim.lr,
                            betas=cfg.optim.betas, weight_decay=cfg.optim.weight_decay)
    tracker = None
    if cfg.algo.npr_threshold > 0:
        from rlvr.algo.curriculum import PassRateTracker

        tracker = PassRateTracker(cfg.algo.npr_threshold)
    intrinsic = cfg.reward.kind not in ("verifier",)
    return TrainState(cfg=cfg, model=model, tok=tok, task=task, opt=opt,
                      data=PromptSampler(problems, cfg.train.seed),
                      params=sample_params(cfg.sampling, tok, self_certainty=intrinsic),
                      gen=torch.Generator().manual_seed(cfg.train.seed), ref_model=ref, tracker=tracker)


def heldout_pass_rate(st: TrainState, n_problems: int, seed: int) -> float:
    """Held-out pass@1: one sample per problem at the training temperature (own RNG stream,
    so evaluating does not change the training trajectory)."""
    problems = st.task.problems("heldout", n_problems)
    gen = torch.Generator().manual_seed(seed)
    rb = sample(st.model, st.tok, [p.prompt for p in problems], st.params, version=st.version, generator=gen)
    verdicts = verify_all(st.task, rb.texts, problems)
    return sum(v.correct for v in verdicts) / max(1, len(verdicts))


def new_run_dir(cfg: RunConfig) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    d = Path(cfg.train.out_dir) / f"{cfg.name}-{stamp}"
    i = 1
    while d.exists():
        d = Path(cfg.train.out_dir) / f"{cfg.name}-{stamp}-{i}"
        i += 1
    return d


def train(cfg: RunConfig | None = None, run_dir: str | Path | None = None, resume: str | Path | None = None,
          progress: str | None = None, extra_steps: int | None = None) -> Path:
    """Run (or resume) an RL run; returns its directory. ``resume`` continues the run in that
    directory from its last good checkpoint, with the config saved there."""
    if resume is not None:
        run = Path(resume)
        if not (run / "config.yaml").exists():
            raise UserError(f"{run}: not a run directory (no config.yaml); pass the folder `rlvr train` created")
        cfg = load_config(run / "config.yaml", [f"train.steps={extra_steps}"] if extra_steps else [])
    else:
        run = Path(run_dir) if run_dir else new_run_dir(cfg)
        run.mkdir(parents=True, exist_ok=True)
    (run / "config.yaml").write_text(dump_yaml(cfg))
    mode = progress or cfg.log.progress
    if cfg.pipeline.mode == "async" and cfg.pipeline.backend == "ray":  # the trainer runs as a Ray actor
        from rlvr.train.ray_backend import train_in_trainer_actor

        done = train_in_trainer_actor(cfg, run, resume is not None, progress, extra_steps)
        if done is not None:
            return done
    model, tok = build_policy(cfg, mode)
    st = build_state(cfg, model, tok)
    start = 0
    if resume is not None:
        ckpt = latest_good_checkpoint(run)
        if ckpt is not None:
            load_checkpoint_into(ckpt, st)
            start = st.step
        if start >= cfg.train.steps:
            warn(f"resume of {run}: the last checkpoint is at step {start} and train.steps={cfg.train.steps}, "
                 "so zero steps would run; raise train.steps (e.g. `--steps N`)")
            return run
    from rlvr.train.pipeline import make_stepper

    step_fn, close_pipeline = make_stepper(st)  # rl_step | async pipeline (pipeline.mode) | data parallel
    log = MetricsLog(run, cfg.log.tensorboard, cfg.log.wandb, truncate_after=start if resume else None)
    bar = Progress(cfg.train.steps, cfg.name, mode, cfg.log.every, start=start)
    try:
        while st.step < cfg.train.steps:
            m = step_fn(st, cfg.train.steps)
            if st.last_entropy is not None:  # observed entropy change, beside the predicted dH_total
                m["entropy_obs_change"] = m["entropy"] - st.last_entropy
            st.last_entropy = m["entropy"]
            every = cfg.train.eval_every
            if (every and st.step % every == 0) or st.step == cfg.train.steps or st.step == 1:
                m["heldout_pass_rate"] = heldout_pass_rate(st, cfg.train.eval_problems, cfg.train.seed + 7)
            if st.nan_steps >= cfg.train.max_nan_steps:
                log.write(m)
                raise UserError(f"stopping: {st.nan_steps} steps had NaN/Inf loss or gradients "
                                f"(train.max_nan_steps={cfg.train.max_nan_steps}); lower optim.lr")
            log.write(m)  # before the checkpoint: a resume truncates to the checkpoint's step
            if st.step % cfg.train.checkpoint_every == 0 or st.step == cfg.train.steps:
                save_checkpoint(run, st, cfg.train.keep_last)
            bar.update(1, **m)
    finally:
        close_pipeline()
        bar.close()
        log.close()
    (run / "train_summary.json").write_text(json.dumps({"steps": st.step, "counters": st.counters,
                                                        "wall_s": st.wall_s}, indent=1))
    return run
