"""The synchronous RL loop: build the state, run steps, evaluate, checkpoint, resume.

Read :func:`train` top to bottom; one step is :func:`rlvr.train.step.rl_step`.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import torch

from rlvr.config import RunConfig, dump_yaml, load_config
from rlvr.errors import UserError
from rlvr.log import MetricsLog, Progress, warn
from rlvr.rollout.engine import sample, sample_params, verify_all
from rlvr.train.checkpoint import latest_good_checkpoint, load_checkpoint_into, remove_partial, save_checkpoint
from rlvr.train.data import PromptSampler, check_test_time, reward_uses_labels, training_problems
from rlvr.train.step import TrainState


def build_policy(cfg: RunConfig, progress: str = "auto"):
    """(model, tokenizer) on ``train.device``: ``model.init_from`` if set, else the cached pretrained
    tiny base (or the HF model of ``model.path``)."""
    from rlvr.model.io import load_policy, resolve_device

    device = resolve_device(cfg.train.device)
    if cfg.model.init_from:
        model, tok = load_policy(cfg.model.init_from)
    elif cfg.model.kind == "hf":
        from rlvr.model.hf import load_hf_policy

        model, tok = load_hf_policy(cfg.model.path, cfg.model)
    else:
        from rlvr.train.pretrain import base_model

        model, tok = load_policy(base_model(cfg.model, cfg.pretrain, progress))
    return model.to(device), tok


def get_task(cfg: RunConfig):
    from rlvr.tasks.registry import get_task as registry_get

    return registry_get(cfg.task.name, **cfg.task.knobs)


def validate(cfg: RunConfig) -> None:
    """Check what the dataclasses cannot: the task (name and knobs), the loss and the reward exist,
    and test-time training (``task.test_time``) does not use held-out labels."""
    from rlvr.algo.losses import LOSSES

    get_task(cfg)
    if cfg.loss.name not in LOSSES:
        import difflib

        close = difflib.get_close_matches(cfg.loss.name, list(LOSSES), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise UserError(f"loss.name: unknown loss {cfg.loss.name!r}; {hint}registered: {', '.join(sorted(LOSSES))}")
    if cfg.reward.kind not in ("verifier", "mix"):
        from rlvr.rewards.intrinsic import INTRINSIC_REWARDS

        if cfg.reward.kind not in INTRINSIC_REWARDS:
            raise UserError(f"reward.kind: unknown {cfg.reward.kind!r}; use verifier, mix or one of "
                            f"{', '.join(sorted(INTRINSIC_REWARDS))}")
    check_test_time(cfg)
    if not reward_uses_labels(cfg.reward) and cfg.algo.npr_threshold > 0:
        warn(f"algo.npr_threshold={cfg.algo.npr_threshold} retires prompts by their ground-truth pass rate, so "
             f"this reward.kind={cfg.reward.kind} run still uses labels; set algo.npr_threshold=0 for "
             "label-free (unsupervised) RLVR")


def build_state(cfg: RunConfig, model, tok) -> TrainState:
    if cfg.train.deterministic:
        torch.use_deterministic_algorithms(True)
        torch.set_num_threads(1)
    torch.manual_seed(cfg.train.seed)
    task = get_task(cfg)
    params = sample_params(cfg.sampling, tok, self_certainty=cfg.reward.kind not in ("verifier",))
    counters: dict = {}
    problems = training_problems(task, cfg.task)  # test-time mode: the held-out (evaluation) problems
    split = "heldout" if cfg.task.test_time else "train"
    skipped = getattr(task, "skipped", None)  # malformed dataset rows dropped by the loader
    if isinstance(skipped, dict) and skipped.get(split):
        counters["bad_rows_skipped"] = skipped[split]
        warn(f"task {cfg.task.name}: skipped {skipped[split]} malformed {split} rows "
             "(missing, empty or wrong-type fields)")
    problems = fitting_problems(problems, model, tok, params, counters, split)
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
    return TrainState(cfg=cfg, model=model, tok=tok, task=task, opt=opt,
                      data=PromptSampler(problems, cfg.train.seed), params=params, counters=counters,
                      gen=torch.Generator().manual_seed(cfg.train.seed), ref_model=ref, tracker=tracker)


def context_limit(model) -> int | None:
    """Maximum sequence length of the policy (tiny: model.cfg.context; HF: max_position_embeddings)."""
    if getattr(getattr(model, "cfg", None), "kind", "tiny") == "hf":
        return getattr(getattr(getattr(model, "lm", None), "config", None), "max_position_embeddings", None)
    return getattr(getattr(model, "cfg", None), "context", None)


def fitting_problems(problems: list, model, tok, params, counters: dict | None = None, split: str = "train"):
    """The problems whose prompt (with BOS) plus the completion budget (max_new_tokens, and the
    interruption text + extra tokens when on) fits the policy's context; the others are skipped,
    counted in ``counters["long_prompts_skipped"]`` and warned about. None fit -> UserError."""
    limit = context_limit(model)
    if limit is None or not problems:
        return problems
    budget = params.max_new_tokens + (len(params.interruption_ids) + params.interruption_extra
                                      if params.interruption_budget else 0)
    lengths = tok.batch_encode_left([p.prompt for p in problems])[1].sum(1).tolist()
    kept = [p for p, n in zip(problems, lengths) if n + budget <= limit]
    skipped = len(problems) - len(kept)
    if skipped and counters is not None:
        counters["long_prompts_skipped"] = counters.get("long_prompts_skipped", 0) + skipped
    if skipped:
        warn(f"{split}: skipped {skipped}/{len(problems)} prompts longer than the context allows "
             f"({limit} tokens - {budget} for the completion); longest is {max(lengths)} tokens")
    if not kept:
        raise UserError(f"every {split} prompt is longer than model context {limit} minus the completion "
                        f"budget {budget}; lower sampling.max_new_tokens or use a longer-context model")
    return kept


def heldout_pass_rate(st: TrainState, n_problems: int, seed: int, samples: int = 1) -> float:
    """Held-out pass@1: the mean correctness of ``samples`` samples per problem at the training
    temperature (own RNG stream, so evaluating does not change the training trajectory)."""
    problems = fitting_problems(st.task.problems("heldout", n_problems), st.model, st.tok, st.params,
                                None, "heldout")
    rows = [p for p in problems for _ in range(samples)]
    gen = torch.Generator().manual_seed(seed)
    rb = sample(st.model, st.tok, [p.prompt for p in rows], st.params, version=st.version, generator=gen)
    verdicts = verify_all(st.task, rb.texts, rows, failure_value=st.cfg.train.reward_failure_value,
                          timeout_s=st.cfg.reward.timeout_s)
    return sum(v.correct for v in verdicts) / max(1, len(verdicts))


def new_run_dir(cfg: RunConfig) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    d = Path(cfg.train.out_dir) / f"{cfg.name}-{stamp}"
    i = 1
    while d.exists():
        d = Path(cfg.train.out_dir) / f"{cfg.name}-{stamp}-{i}"
        i += 1
    return d


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _log_line(log: MetricsLog, m: dict) -> None:
    """Append the metrics line; a failed write (disk full) becomes a one-line UserError."""
    try:
        log.write(m)
    except OSError as e:
        raise UserError(f"could not append to {log.path} ({e.strerror or e}); checkpoints up to the last one "
                        "are intact; free disk space and resume with --resume") from None


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
        validate(cfg)  # a typo must fail in the first second, before any pretraining
        run = Path(run_dir) if run_dir else new_run_dir(cfg)
        run.mkdir(parents=True, exist_ok=True)
    _atomic_write(run / "config.yaml", dump_yaml(cfg))  # a kill here must not leave a torn config
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
        for d in remove_partial(run):
            warn(f"removed {d.name}: a checkpoint write interrupted by a crash")
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
                m["heldout_pass_rate"] = heldout_pass_rate(st, cfg.train.eval_problems, cfg.train.seed + 7,
                                                            cfg.train.eval_samples)
            if st.nan_steps >= cfg.train.max_nan_steps:
                _log_line(log, m)
                raise UserError(f"stopping: {st.nan_steps} steps had NaN/Inf loss or gradients "
                                f"(train.max_nan_steps={cfg.train.max_nan_steps}); lower optim.lr")
            _log_line(log, m)  # before the checkpoint: a resume truncates to the checkpoint's step
            if st.step % cfg.train.checkpoint_every == 0 or st.step == cfg.train.steps:
                ms = cfg.train.milestone_every
                save_checkpoint(run, st, cfg.train.keep_last, milestone=bool(ms) and st.step % ms == 0)
            bar.update(1, **m)
    finally:
        close_pipeline()
        bar.close()
        try:
            log.close()
        except OSError:  # only a line whose write already failed (and was reported) is pending
            pass
    (run / "train_summary.json").write_text(json.dumps({"steps": st.step, "counters": st.counters,
                                                        "wall_s": st.wall_s}, indent=1))
    return run
