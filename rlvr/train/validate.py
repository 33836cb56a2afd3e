"""Checks of a run config that need the registries (tasks, losses, rewards): what the typed
dataclasses of :mod:`rlvr.config` cannot know. Every command runs them right after loading a config,
before it creates a directory or loads a model; each failure is a one-line ConfigError naming the key."""

from __future__ import annotations

import difflib
from pathlib import Path

from rlvr.algo.losses import LOSSES
from rlvr.config import ConfigError, RunConfig
from rlvr.errors import UserError
from rlvr.log import warn
from rlvr.model.io import looks_like_hf_name
from rlvr.rewards.funcs import check_funcs, columns_of
from rlvr.rewards.intrinsic import INTRINSIC_REWARDS
from rlvr.tasks.registry import TASKS, is_task_ref, knob_names, resolve
from rlvr.train.data import check_test_time, reward_uses_labels
from rlvr.train.state import get_task
from rlvr.train.teacher import check_teacher_files

REWARD_KINDS = ("verifier", "mix", "funcs")
"""reward.kind values besides the intrinsic rewards (:data:`rlvr.rewards.intrinsic.INTRINSIC_REWARDS`)."""


def validate(cfg: RunConfig) -> None:
    """Check what the dataclasses cannot: every name the config uses is registered (task and its
    knobs, retention and corpus tasks, loss, reward kind and mix weights), the model and distillation
    teacher paths exist (or name hub models), the teacher shares the student's tokenizer and output
    width (read from their files), the task can be built, and
    test-time training (``task.test_time``) does not use held-out labels."""
    _task(cfg.task.name, "task.name")
    allowed = knob_names(resolve(cfg.task.name))
    for knob in cfg.task.knobs if allowed is not None else ():
        _known(knob, allowed, f"task.knobs.{knob}", f"knob of task {cfg.task.name!r}")
    for i, name in enumerate(cfg.task.retention_tasks):
        _task(name, f"task.retention_tasks[{i}]")
    for name in cfg.pretrain.mix:
        _task(name, f"pretrain.mix.{name}")
    for name, knobs in cfg.pretrain.task_knobs.items():
        _known(name, sorted({*cfg.pretrain.mix, *cfg.task.retention_tasks}), f"pretrain.task_knobs.{name}",
               "task of pretrain.mix or task.retention_tasks")
        allowed = knob_names(resolve(name))
        for knob in knobs if allowed is not None else ():
            _known(knob, allowed, f"pretrain.task_knobs.{name}.{knob}", f"knob of task {name!r}")
    _known(cfg.loss.name, sorted(LOSSES), "loss.name", "loss")
    _known(cfg.reward.kind, [*REWARD_KINDS, *sorted(INTRINSIC_REWARDS)], "reward.kind", "reward kind")
    for name in cfg.reward.weights:
        _known(name, ["verifier", *sorted(INTRINSIC_REWARDS)], f"reward.weights.{name}", "reward")
    for key in ("init_from", "path"):
        where = getattr(cfg.model, key)
        if where and (key == "init_from" or cfg.model.kind == "hf") and not Path(where).expanduser().exists() \
                and not looks_like_hf_name(where):
            raise ConfigError(f"model.{key}: {where} does not exist; pass a checkpoint or model directory, or a "
                              "hub name like Qwen/Qwen2.5-0.5B-Instruct")
    teacher = cfg.loss.teacher
    if teacher and not Path(teacher).expanduser().exists() and not looks_like_hf_name(teacher):
        raise ConfigError(f"loss.teacher: {teacher} does not exist; train a teacher first and pass its checkpoint "
                          "directory (docs/methods/on_policy_distillation.md), or a hub name like Qwen/Qwen2.5-1.5B")
    check_teacher_files(cfg)  # its tokenizer and output width against the student's, from their files
    try:
        task = get_task(cfg)  # the task's own checks (data files, knob values), and that it is a task
    except UserError as e:
        if not is_task_ref(cfg.task.name) or isinstance(e, ConfigError):
            raise
        raise ConfigError(f"task.name: {e}") from None
    if cfg.reward.funcs:
        sample = task.problems("train", 1) if not cfg.task.test_time else task.problems("heldout", 1)
        try:
            check_funcs(cfg.reward.funcs, list(columns_of(sample)))
        except UserError as exc:
            raise ConfigError(f"reward.funcs: {exc}") from exc
    check_test_time(cfg)
    if not reward_uses_labels(cfg.reward) and cfg.algo.npr_threshold > 0:
        warn(f"algo.npr_threshold={cfg.algo.npr_threshold} retires prompts by their ground-truth pass rate, so "
             f"this reward.kind={cfg.reward.kind} run still uses labels; set algo.npr_threshold=0 for "
             "label-free (unsupervised) RLVR")


def _task(name, key: str) -> None:
    """ConfigError naming ``key`` unless ``name`` is a registered task or a loadable task reference
    (``path/to/task.py:ClassName`` | ``package.module:ClassName``)."""
    if not is_task_ref(name):
        _known(name, sorted(TASKS), key, "task")
        return
    try:
        resolve(name)
    except UserError as e:
        raise ConfigError(f"{key}: {e}") from None


def _known(name, options: list[str], key: str, what: str) -> None:
    """ConfigError ``key: unknown <what> 'x'; did you mean 'y'? (known: ...)`` unless name is an option."""
    if name in options:
        return
    close = difflib.get_close_matches(str(name), options, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise ConfigError(f"{key}: unknown {what} {name!r}; {hint}known: {', '.join(options) or '(none)'}")
