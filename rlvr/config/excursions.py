"""The excursions pipelines' two configs, which share a YAML section (``excursions:``).

- :class:`ExcursionsConfig` (``RunConfig.excursions``): how the excursions pipelines train (sft,
  sft_gold, sft_then_rl, parallel, distill and the RL budget ``rl_steps``): read by ``rlvr excursions``
  and by ``rlvr reproduce``'s model kinds, part of every cell key.
- :class:`ExcursionsGrid`: the grid of ``rlvr excursions`` (which milestones and pipelines, how each
  cell is evaluated, where the grid is written): read by that command only, never part of a RunConfig.

The loader (:func:`rlvr.config.loader.load_excursions`) splits the section by key: a config file or an
override names either kind as ``excursions.KEY``, and both are checked wherever a config is loaded.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import ClassVar

from rlvr.config.checks import (
    FRACTION,
    NON_NEGATIVE,
    POSITIVE,
    RANGES,
    UNIT,
    Range,
    at_least,
    check,
    check_ranges,
    check_section_ranges,
)

EXCURSION_PIPELINES = ("rl", "sft", "sft_gold", "sft_then_rl", "parallel", "distill")


@dataclass(frozen=True)
class ExcursionsConfig:
    """How the excursions pipelines train; read by ``rlvr excursions`` and by ``rlvr reproduce``'s model
    kinds. (The section keeps its name: renaming it would change every cell key for nothing.)"""

    steps: int = 24
    """Optimiser steps per pipeline (sft_then_rl: the first half SFT, the second half RL)."""
    sft_lr: float = 0.0005
    """AdamW learning rate of the SFT updates (RL uses optim.lr)."""
    sft_batch_size: int = 0
    """Pairs per SFT step; 0 = algo.prompts_per_step * algo.group_size (an RL step's rows)."""
    sft_data: str = "sft"
    """Gold data of sft_then_rl and parallel: sft (one solution per problem) | sft_gold (all)."""
    parallel_weight: float = 0.5
    """Parallel averaging: theta <- theta + w * d_RL + (1 - w) * d_SFT."""
    teacher: str = ""
    """Distillation teacher checkpoint; "" = the rl pipeline's result from the last milestone
    (``rlvr excursions``) or the declared teacher model (``rlvr reproduce``)."""

    def __post_init__(self):
        check_section_ranges(self, "excursions")
        check(self.sft_data in ("sft", "sft_gold"), "excursions.sft_data", "use sft or sft_gold")


RANGES["excursions"] = {
    "steps": at_least(2), "sft_lr": POSITIVE, "sft_batch_size": NON_NEGATIVE, "parallel_weight": UNIT,
}


@dataclass(frozen=True)
class ExcursionsGrid:
    """The grid of ``rlvr excursions``: pretraining milestones x pipelines, each cell evaluated the same
    way (its keys sit in the config's ``excursions:`` section beside :class:`ExcursionsConfig`'s)."""

    milestones: tuple[float, ...] = (0.25, 0.5, 1.0)
    """Pretraining checkpoints each pipeline starts from (fractions; each must be in pretrain.milestones)."""
    pipelines: tuple[str, ...] = EXCURSION_PIPELINES
    """Pipelines run from every checkpoint: rl sft sft_gold sft_then_rl parallel distill."""
    eval_problems: int = 64
    """Held-out target-task problems per evaluation."""
    eval_samples: int = 32
    """Samples per problem for pass@k (k = 1, 8, 32 where <= this)."""
    eval_temperature: float = 0.6
    """Sampling temperature of the pass@k evaluation."""
    retention_problems: int = 128
    """Held-out problems of each task.retention_tasks task (greedy accuracy = general ability)."""
    out_dir: str = "runs/excursions"
    """Folder of the grid: its models and evaluations (the experiment framework's cells), table.md,
    table.json, plots/."""

    RANGES: ClassVar[dict[str, Range]] = {
        "milestones": FRACTION, "eval_problems": at_least(1), "eval_samples": at_least(1),
        "eval_temperature": NON_NEGATIVE, "retention_problems": at_least(1),
    }

    def __post_init__(self):
        check_ranges(self, self.RANGES, "excursions")
        bad = [p for p in self.pipelines if p not in EXCURSION_PIPELINES]
        check(not bad, "excursions.pipelines", f"unknown {bad}; use {', '.join(EXCURSION_PIPELINES)}")
        check(bool(self.milestones), "excursions.milestones", "needs at least one fraction in (0, 1]")


GRID_KEYS = tuple(f.name for f in fields(ExcursionsGrid))
"""The keys of the ``excursions:`` section that belong to :class:`ExcursionsGrid`."""
