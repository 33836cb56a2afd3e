"""The excursions pipelines (docs/methods/excursions.md): how a model trains from a pretraining
checkpoint on one budget. ``rlvr excursions`` runs them as a grid (:mod:`rlvr.experiments.excursions_grid`)
and ``rlvr reproduce`` as model kinds (:mod:`rlvr.experiments.models`).

Pipelines (from a checkpoint M_t; S = ``excursions.steps`` optimiser steps, R = P*G rows):

    rl           S RL steps (the trainer's :func:`rl_step`)                     S*R policy samples
    sft          S SFT steps on one gold solution per problem, R pairs a step    S*R gold pairs
    sft_gold     S SFT steps on every gold solution                              S*R gold pairs
    sft_then_rl  S/2 SFT steps (``excursions.sft_data``), then S/2 RL steps       both, halved
    parallel     S averaged updates theta += w d_RL + (1-w) d_SFT (own AdamWs)   S*R + S*R
    distill      the teacher samples S*R completions (G per train problem); the verified-right
                 ones are the SFT data of S student steps                        S*R teacher samples
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rlvr.config import EXCURSION_PIPELINES, RunConfig
from rlvr.errors import UserError
from rlvr.log import MetricsLog
from rlvr.model.io import load_policy_as
from rlvr.train.averaging import parallel_step
from rlvr.train.sft import batches, distill_pairs, sft_optimizer, sft_pairs, sft_update
from rlvr.train.state import build_state
from rlvr.train.step import rl_step


def sft_batch_size(cfg: RunConfig) -> int:
    return cfg.excursions.sft_batch_size or cfg.algo.prompts_per_step * cfg.algo.group_size


def train_problems(cfg: RunConfig, task) -> list:
    return task.problems("train", cfg.task.train_size or None)


# ----------------------------------------------------------------------------- phases
class Counters:
    """Budget actually spent by a pipeline (the table states it)."""

    def __init__(self):
        self.opt_steps = self.policy_samples = self.teacher_samples = self.sft_pairs = 0
        self.extra: dict = {}

    def as_dict(self) -> dict:
        return {"opt_steps": self.opt_steps, "policy_samples": self.policy_samples,
                "teacher_samples": self.teacher_samples, "sft_pairs": self.sft_pairs, **self.extra}


def rl_phase(cfg: RunConfig, model, tok, steps: int, log: MetricsLog, c: Counters,
             on_step: Callable[[int], None] | None = None) -> None:
    """``steps`` optimiser steps of RL (a fresh RL AdamW), one metrics line per RL step;
    ``on_step(optimiser steps so far)`` after each (e.g. to keep milestone checkpoints)."""
    st = build_state(cfg, model, tok)
    per = cfg.algo.minibatches * cfg.algo.ppo_epochs
    n = max(1, steps // per)
    for _ in range(n):
        before = st.samples
        m = rl_step(st, n)
        c.opt_steps += per
        c.policy_samples += st.samples - before
        log.write({**m, "phase": "rl", "step": c.opt_steps, "policy_samples": c.policy_samples})
        if on_step is not None:
            on_step(c.opt_steps)


def sft_phase(cfg: RunConfig, model, tok, pairs: list, steps: int, log: MetricsLog, c: Counters,
              on_step: Callable[[int], None] | None = None) -> None:
    """``steps`` SFT steps (fresh AdamW, lr ``excursions.sft_lr``) on seeded batches of ``pairs``;
    ``on_step(optimiser steps so far)`` after each (e.g. to keep milestone checkpoints)."""
    opt = sft_optimizer(model, cfg.excursions.sft_lr, cfg.optim.betas, cfg.optim.weight_decay)
    it = batches(pairs, sft_batch_size(cfg), cfg.train.seed)
    for _ in range(steps):
        batch = next(it)
        m = sft_update(model, tok, batch, opt, cfg.optim.grad_clip)
        c.opt_steps += 1
        c.sft_pairs += len(batch)
        log.write({**m, "phase": "sft", "step": c.opt_steps, "sft_pairs": c.sft_pairs})
        if on_step is not None:
            on_step(c.opt_steps)


def parallel_phase(cfg: RunConfig, model, tok, pairs: list, steps: int, log: MetricsLog, c: Counters,
                   on_step: Callable[[int], None] | None = None) -> None:
    """``steps`` averaged updates: RL (own AdamW) and SFT (own AdamW) from the same theta;
    ``on_step(optimiser steps so far)`` after each."""
    if cfg.algo.minibatches * cfg.algo.ppo_epochs != 1:
        raise UserError("the parallel pipeline averages one RL update with one SFT update; "
                        "set algo.minibatches=1 algo.ppo_epochs=1")
    st = build_state(cfg, model, tok)
    sft_opt = sft_optimizer(model, cfg.excursions.sft_lr, cfg.optim.betas, cfg.optim.weight_decay)
    it = batches(pairs, sft_batch_size(cfg), cfg.train.seed)
    for _ in range(steps):
        before = st.samples
        batch = next(it)
        m = parallel_step(st, sft_opt, batch, steps, cfg.excursions.parallel_weight)
        c.opt_steps += 1
        c.policy_samples += st.samples - before
        c.sft_pairs += len(batch)
        log.write({**m, "phase": "parallel", "step": c.opt_steps, "policy_samples": c.policy_samples,
                   "sft_pairs": c.sft_pairs})
        if on_step is not None:
            on_step(c.opt_steps)


def distill_data(cfg: RunConfig, task, teacher: Path, c: Counters) -> list:
    """The teacher's verified-right completions: G samples on each of the first S*P train problems
    (S*R samples: the RL pipeline's generation budget; fewer if the task has fewer problems)."""
    t_model, t_tok = load_policy_as(teacher, cfg.model)
    G = cfg.algo.group_size
    n_problems = cfg.excursions.steps * cfg.algo.prompts_per_step  # x G samples = S*R
    problems = train_problems(cfg, task)[:n_problems]
    pairs, stats = distill_pairs(t_model, t_tok, task, problems, G, cfg.sampling, cfg.train.seed + 11)
    c.teacher_samples += stats["generated"]
    c.extra.update(distill_kept=stats["kept"], distill_keep_rate=stats["kept"] / max(1, stats["generated"]))
    if not pairs:
        raise UserError(f"the distillation teacher {teacher} got no training problem right; "
                        "use a stronger excursions.teacher")
    return pairs


def run_pipeline(cfg: RunConfig, pipeline: str, model, tok, task, log: MetricsLog,
                 teacher: Path | None = None, on_step: Callable[[int], None] | None = None) -> dict:
    """Train ``model`` in place with ``pipeline`` on the configured budget -> budget counters.
    ``on_step``: called after each optimiser step with the steps so far (every pipeline but
    sft_then_rl), e.g. to keep milestone checkpoints."""
    S, c = cfg.excursions.steps, Counters()
    golds = lambda mode: sft_pairs(train_problems(cfg, task), mode)  # noqa: E731
    if pipeline == "rl":
        rl_phase(cfg, model, tok, S, log, c, on_step)
    elif pipeline in ("sft", "sft_gold"):
        sft_phase(cfg, model, tok, golds(pipeline), S, log, c, on_step)
    elif pipeline == "sft_then_rl":
        sft_phase(cfg, model, tok, golds(cfg.excursions.sft_data), S // 2, log, c)
        rl_phase(cfg, model, tok, S - S // 2, log, c)
    elif pipeline == "parallel":
        parallel_phase(cfg, model, tok, golds(cfg.excursions.sft_data), S, log, c, on_step)
    elif pipeline == "distill":
        if teacher is None:
            raise UserError("the distill pipeline needs a teacher; set excursions.teacher")
        sft_phase(cfg, model, tok, distill_data(cfg, task, teacher, c), S, log, c, on_step)
    elif pipeline != "base":
        raise UserError(f"unknown pipeline {pipeline!r}; use base or one of {', '.join(EXCURSION_PIPELINES)}")
    return c.as_dict()
