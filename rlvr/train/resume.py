"""Resuming a run with exactly the config it was started with.

- :func:`saved_config`: ``RUN/config.yaml`` read strictly; empty, unreadable, not a mapping or not a
  valid config is a UserError naming the file (never the built-in defaults in its place).
- :func:`steps_target`: the step count a resume trains to. ``--steps N`` extends (or shortens) the
  run without rewriting ``config.yaml``: the new target is recorded in ``RUN/resume.json`` and a
  line on stderr says so; a later plain ``--resume`` trains to the recorded target.
- :func:`check_fits` / :func:`restore`: a checkpoint whose model does not match ``config.yaml`` (the
  file replaced by another run's) is a UserError naming the keys that differ, before any model is
  built, instead of a size-mismatch traceback.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path

from rlvr.config import RunConfig, from_dict, read_mapping
from rlvr.errors import UserError
from rlvr.paths import atomic_write, require_run_dir
from rlvr.train.checkpoint import list_checkpoints, load_checkpoint_into

RESUME_FILE = "resume.json"
"""Where a run records the step targets that ``--resume --steps N`` set (config.yaml stays as started)."""

MODEL_SHAPE_KEYS = ("kind", "path", "n_layer", "d_model", "n_head", "context", "mlp", "tie_weights", "lora_r")
"""The ``model`` keys that decide the shapes a checkpoint holds."""


def saved_config(run: str | Path) -> RunConfig:
    """The config ``RUN/config.yaml`` holds, read with the one strict loader."""
    path = require_run_dir(run, "--resume")
    data = read_mapping(path, "run config", "the run cannot resume without the config it started with: restore "
                        "the file (e.g. from a copy), or start a new run")
    try:
        return from_dict(RunConfig, data)
    except UserError as e:
        raise UserError(f"{path}: {e}; this run's saved config is not valid (edited by hand?): restore it") from None


def recorded_steps(run: Path) -> int | None:
    """The step target a previous ``--resume --steps N`` recorded, if any."""
    path = Path(run) / RESUME_FILE
    if not path.is_file():
        return None
    try:
        return int(json.loads(path.read_text(encoding="utf-8"))["steps"])
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: not a resume record ({e}); delete it to train to config.yaml's "
                        "train.steps") from None


def steps_target(run: str | Path, cfg: RunConfig, extra_steps: int | None, record: bool = True) -> RunConfig:
    """``cfg`` with ``train.steps`` set to the target of this resume: ``extra_steps`` when given
    (with ``record``: written to ``RUN/resume.json`` and announced on stderr), else the last recorded target, else
    config.yaml's own. ``config.yaml`` is never rewritten."""
    run = Path(run)
    recorded = recorded_steps(run)
    if extra_steps is None:
        steps = recorded if recorded is not None else cfg.train.steps
        return dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, steps=steps))
    if extra_steps < 1:
        raise UserError(f"--steps {extra_steps}: must be >= 1 (the run's new total number of steps)")
    before = recorded if recorded is not None else cfg.train.steps
    if record:
        previous = _read_record(run)
        history = [*previous.get("history", []), {"steps": extra_steps, "from": before,
                                                 "time": time.strftime("%Y-%m-%dT%H:%M:%S")}]
        atomic_write(run / RESUME_FILE, json.dumps({"steps": extra_steps, "config_steps": cfg.train.steps,
                                                    "history": history}, indent=1))
        print(f"--steps {extra_steps}: the run now trains to step {extra_steps} (was {before}); recorded in "
              f"{run / RESUME_FILE}; config.yaml keeps train.steps={cfg.train.steps}", file=sys.stderr, flush=True)
    return dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, steps=extra_steps))


def _read_record(run: Path) -> dict:
    path = run / RESUME_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def check_fits(run: Path, cfg: RunConfig) -> None:
    """UserError when the newest checkpoint's saved model config differs from ``cfg.model`` in a key
    that decides the weights' shapes (read, not verified: checked before any model is built). A run
    started from ``model.init_from`` takes its shapes from that checkpoint, not from these keys: it is
    left to :func:`restore`."""
    if cfg.model.init_from:
        return
    ckpts = list_checkpoints(Path(run) / "checkpoints")
    saved = ckpts[-1] / "model_config.json" if ckpts else None
    if saved is None or not saved.is_file():
        return
    try:
        held = json.loads(saved.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        return  # a torn checkpoint: the checksum check skips it later
    want = dataclasses.asdict(cfg.model)
    differ = [f"model.{k}: {want[k]!r} in config.yaml, {held[k]!r} in the checkpoint" for k in MODEL_SHAPE_KEYS
              if k in held and k in want and held[k] != want[k]]
    if differ:
        raise UserError(f"{Path(run) / 'config.yaml'} does not match checkpoint {ckpts[-1].name} "
                        f"({'; '.join(differ)}): the file was changed after the run started (another run's "
                        "config?); restore the config this run was trained with, or start a new run")


def restore(ckpt: Path, st, config_path: Path) -> None:
    """:func:`rlvr.train.checkpoint.load_checkpoint_into`, a shape mismatch a one-line UserError."""
    try:
        load_checkpoint_into(ckpt, st)
    except (RuntimeError, ValueError) as e:
        detail = next((line.strip() for line in str(e).splitlines() if "mismatch" in line), str(e).splitlines()[0])
        raise UserError(f"checkpoint {ckpt} does not fit {config_path} ({detail}); restore the config this run "
                        "was trained with, or start a new run") from None
