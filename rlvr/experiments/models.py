"""Train (or find) the models an experiment declares, one directory per model and seed, cached.

``OUT/models/<name>[-s<seed>]/done.json`` records a finished model (its checkpoint path, the kept
milestones of an RL run, the wall time) with a key over everything that decides it (the resolved
config, the kind, the teacher); a changed declaration retrains. Kinds:

- ``base``: the cached pretrained base of the config (``rlvr pretrain``; unseeded);
- ``rl``: the config's RL recipe from the experiment's ``base`` through the train loop (resumed from
  its last good checkpoint after a kill), keeping ``milestones`` evenly spaced checkpoints;
- ``sft`` / ``sft_gold``: SFT from ``base`` on one / all gold traces of the training problems
  (``excursions.steps`` steps at ``excursions.sft_lr``), keeping ``milestones`` evenly spaced
  checkpoints (``models/<name>/milestones/step_XXXXXX``);
- ``distill``: SFT from ``base`` on the teacher's verified-right samples of the training problems (the
  declared teacher model, else the checkpoint ``excursions.teacher`` names); an ``rl`` model with a
  ``teacher`` is on-policy distillation (``loss.name=opd``): its ``loss.teacher`` is that model's checkpoint;
- ``sft_then_rl`` / ``parallel`` / ``rl_steps``: the excursion pipelines
  (:func:`rlvr.train.excursions.run_pipeline`): half the budget of SFT then half of RL,
  ``excursions.steps`` averaged SFT and RL updates, or ``excursions.steps`` RL optimiser steps
  (the last two keep ``milestones`` checkpoints as SFT does).

A model's ``start`` (a pretraining fraction) makes it start from that milestone checkpoint of the base's
pretraining run instead of the final base; a ``base`` model with a ``start`` is that checkpoint. A
model's ``base`` names which declared base model it starts from (default ``base``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import time
from pathlib import Path

import torch

from rlvr.config import RunConfig, config_hash, load_config, to_dict
from rlvr.errors import UserError
from rlvr.experiments.spec import Experiment, ModelSpec
from rlvr.log import MetricsLog
from rlvr.model.io import load_policy_as, save_policy, weights_digest
from rlvr.paths import atomic_write, is_run_dir
from rlvr.train.checkpoint import checkpoint_step, latest_good_checkpoint, milestone_checkpoints
from rlvr.train.excursions import run_pipeline
from rlvr.train.loop import train
from rlvr.train.pretrain import base_model, base_path, cached_base, milestone_name, milestone_path
from rlvr.train.state import get_task


class RunPaused(Exception):
    """A model's RL run stopped on its time budget (``stop_at``) before its last step: it is
    checkpointed, not finished (no ``done.json``); building it again resumes it."""


def model_id(name: str, seed: int | None) -> str:
    return name if seed is None else f"{name}-s{seed}"


def _last_step(metrics: Path) -> int | None:
    """The ``step`` of the last complete JSON line of a run's metrics.jsonl (None: none yet); reads
    only the file's tail, so a long run's log costs nothing."""
    with open(metrics, "rb") as f:
        f.seek(0, 2)
        f.seek(max(0, f.tell() - 65536))
        lines = f.read().splitlines()
    for line in reversed(lines):
        try:
            row = json.loads(line)
        except ValueError:
            continue  # the line being written, or a cut first line of the tail
        if isinstance(row, dict) and isinstance(row.get("step"), int):
            return row["step"]
    return None


def unfinished_runs(out: Path) -> list[dict]:
    """The RL runs under ``OUT/models/`` begun and not finished (a ``run/metrics.jsonl``, no
    ``done.json``), by folder name: {"model" (the folder: ``NAME[-sS]``), "step" (the last logged, None
    before the first), "steps" (its config's ``train.steps``), "checkpoint" (the last good checkpoint's
    step, where a killed run resumes; None before the first), "age_s" (seconds since its log was last
    written: a running run's is a few seconds)}."""
    rows = []
    root = out / "models"
    for d in sorted(root.iterdir()) if root.is_dir() else []:
        metrics = d / "run" / "metrics.jsonl"
        if (d / "done.json").exists() or not metrics.is_file():
            continue
        try:
            steps = load_config(str(d / "run" / "config.yaml")).train.steps
        except UserError:  # its config missing or unreadable: the step without its total
            steps = None
        last = latest_good_checkpoint(d / "run")
        rows.append({"model": d.name, "step": _last_step(metrics), "steps": steps,
                     "checkpoint": None if last is None else checkpoint_step(last),
                     "age_s": max(0.0, time.time() - metrics.stat().st_mtime)})
    return rows


TEACHER_REF = "model:"
"""An on-policy distillation model's ``loss.teacher`` in its resolved config (and so in its key): the
declared teacher's name after this prefix (a checkpoint path would differ between machines); the
teacher's checkpoint replaces it when the model trains (:func:`build_model`)."""


def model_config(exp: Experiment, spec: ModelSpec, seed: int | None) -> RunConfig:
    """The resolved config of one model: float32, the experiment's config, its overrides, the
    model's, the seed (a seeded model's; an unseeded model keeps the config's ``train.seed``). An
    experiment runs in float32 unless it (or a model) sets ``model.dtype``: "auto" would pick bf16 on a
    machine where it is fast, so the same cell key would mean other numerics on another machine."""
    seeded = [] if seed is None else [f"train.seed={seed}"]
    taught = [f"loss.teacher={TEACHER_REF}{spec.teacher}"] if spec.kind == "rl" and spec.teacher else []
    cfg = load_config(exp.config, [*exp.overrides, *spec.overrides, *exp.last_overrides, *seeded, *taught])
    if cfg.model.dtype == "auto":
        cfg = dataclasses.replace(cfg, model=cfg.model.with_dtype("float32"))
    return cfg


HISTORICAL_GRID = {"milestones": [0.25, 0.5, 1.0], "pipelines": ["rl", "sft", "sft_gold", "sft_then_rl", "parallel",
                                                                  "distill"],
                   "eval_problems": 64, "eval_samples": 32, "eval_temperature": 0.6, "retention_problems": 128,
                   "out_dir": "runs/excursions"}
"""The grid of ``rlvr excursions`` as RunConfig's ``excursions`` section held it until it left (issue 46):
its defaults; the built-in ``excursions`` config set ``eval_problems: 48``. Frozen: never edit it."""


ADDED_AT_DEFAULT = {"sampling": {"max_turns": 4, "max_turn_tokens": 0, "tool_timeout_s": 5.0,
                                  "max_observation_chars": 256},
                    "loss": {"teacher": "", "distill_beta": 1.0, "reward_coef": 0.0},
                    "train": {"entropy_probe": 0}}
"""Config fields added after cell keys were first published, with the value they were added at
(section -> field -> value; issue 54's episode limits, issue 50's on-policy distillation fields, issue
48's entropy probe). A field at that value is left out of every key, so that adding a field keeps
every cached and published cell's key; set to anything else, it is hashed. Append a field here when it
is added to a section; never edit an entry."""


def keyed_section(cfg: RunConfig, section: str) -> dict:
    """The mapping of ``cfg``'s section ``section`` that cell keys hash: :data:`ADDED_AT_DEFAULT`'s
    fields left out where they still hold the value they were added at."""
    d = to_dict(getattr(cfg, section))
    for name, value in ADDED_AT_DEFAULT.get(section, {}).items():
        if d.get(name) == value:
            del d[name]
    return d


def keyed_config(cfg: RunConfig) -> dict:
    """What a model's key hashes of its config: every section as :func:`keyed_section` gives it, the
    ``excursions`` section carrying the grid fields at their historical values (:data:`HISTORICAL_GRID`;
    48 problems under the built-in ``excursions`` config's name). Compatibility rules: the grid fields
    left RunConfig and no model reads them, but keys hashed them; fields added since keys were published
    are hashed only when set away from the value they were added at. So every cached and published
    model keeps its key."""
    legacy = {**HISTORICAL_GRID, **({"eval_problems": 48} if cfg.name == "excursions" else {})}
    d = to_dict(cfg)
    for section in ADDED_AT_DEFAULT:
        d[section] = keyed_section(cfg, section)
    d["excursions"] = {**d["excursions"], **legacy}
    return d


def _key(cfg: RunConfig, spec: ModelSpec, start: str, teacher: str) -> str:
    """``start`` / ``teacher``: what the model is built from, named by those models' keys (never by
    their paths, so a record moved to another cache or machine still matches)."""
    blob = json.dumps({"cfg": config_hash(keyed_config(cfg)), "kind": spec.kind, "milestones": spec.milestones,
                       "start": start, "teacher": teacher}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _base_key(cfg: RunConfig, spec: ModelSpec) -> str:
    """A base model's key: its config and the pretraining milestone it is (none for the final base)."""
    return _key(cfg, spec, "" if spec.start == 1.0 else f"milestone_{spec.start:.2f}", "")


def _done(d: Path, key: str) -> dict | None:
    try:
        info = json.loads((d / "done.json").read_text())
    except (OSError, ValueError):
        return None
    return info if info.get("key") == key else None


def _needs(exp: Experiment, spec: ModelSpec, seed: int | None, built: dict[str, dict]) -> list[str]:
    """The ids of what a trained model is built from (its base, its teacher), all in ``built``."""
    needs = [spec.base]
    if spec.teacher:
        t = exp.models[spec.teacher]
        needs.append(model_id(t.name, seed if t.seeded else None))
    missing = [n for n in needs if n not in built]
    if missing:
        raise UserError(f"{model_id(spec.name, seed)} needs {', '.join(missing)}, which could not be built")
    return needs


def _identities(exp: Experiment, spec: ModelSpec, seed: int | None, built: dict[str, dict]) -> tuple[str, str]:
    """(the start's identity for the key, the teacher's or "") of a trained model: keys only, so
    a model is found without its base's weights (:func:`base_identity`)."""
    needs = _needs(exp, spec, seed, built)
    start_id = built[spec.base]["key"] + ("" if spec.start == 1.0 else f"@{spec.start:.2f}")
    return start_id, built[needs[1]]["key"] if spec.teacher else ""


def _inputs(exp: Experiment, spec: ModelSpec, seed: int | None,
            built: dict[str, dict]) -> tuple[str, str, str, str]:
    """(start checkpoint, teacher checkpoint or "", the start's identity for the key, the teacher's)
    of a trained model, from the models built before it."""
    needs = _needs(exp, spec, seed, built)
    teacher = built[needs[1]]["path"] if spec.teacher else ""
    start_id, teacher_id = _identities(exp, spec, seed, built)
    return str(milestone_path(built[spec.base]["path"], spec.start)), teacher, start_id, teacher_id


def model_cached(exp: Experiment, spec: ModelSpec, seed: int | None, out: Path, built: dict[str, dict]) -> bool:
    """Whether :func:`build_model` would only read this model back (no training)."""
    cfg = model_config(exp, spec, seed)
    if spec.kind == "base":
        found = cached_base(cfg.model, cfg.pretrain)
        return found is not None and (spec.start == 1.0 or milestone_path(found, spec.start).exists())
    try:
        start_id, teacher_id = _identities(exp, spec, seed, built)
    except UserError:  # what it is built from is missing
        return False
    return _done(out / "models" / model_id(spec.name, seed), _key(cfg, spec, start_id, teacher_id)) is not None


def model_state(exp: Experiment, spec: ModelSpec, seed: int | None, out: Path, built: dict[str, dict]) -> str:
    """"cached" (:func:`model_cached`), "stale" (a finished model sits in its folder under another key:
    computed under an older declaration or code) or "absent"."""
    if model_cached(exp, spec, seed, out, built):
        return "cached"
    return "stale" if (out / "models" / model_id(spec.name, seed) / "done.json").exists() else "absent"


def build_model(exp: Experiment, spec: ModelSpec, seed: int | None, out: Path, built: dict[str, dict],
                progress: str = "none", stop_at: float | None = None) -> dict:
    """Train (or reuse) one model -> {"path", "milestones", "wall_s", "key"}. ``built`` maps model
    ids already built to their info (the base, a teacher). ``stop_at``: a ``time.time()`` deadline
    for an RL run, which then checkpoints and raises :class:`RunPaused` (the next call resumes it;
    the other kinds are short and finish)."""
    cfg = model_config(exp, spec, seed)
    d = out / "models" / model_id(spec.name, seed)
    if spec.kind == "base":
        t0 = time.time()
        path = str(milestone_path(base_model(cfg.model, cfg.pretrain, progress), spec.start))
        return {"path": path, "milestones": [], "wall_s": time.time() - t0, "key": _base_key(cfg, spec),
                "weights": weights_digest(path)}
    key = _key(cfg, spec, *_identities(exp, spec, seed, built))
    info = _done(d, key)
    if info is not None:
        return info
    if built[spec.base].get("identity_only"):
        raise UserError(f"{model_id(spec.name, seed)} is not on disk, and reading cells only (--page-only) trains "
                        "nothing")
    start, teacher, _, _ = _inputs(exp, spec, seed, built)
    t0 = time.time()
    if spec.kind == "rl":
        if teacher:  # on-policy distillation: the declared teacher's checkpoint scores every token
            cfg = dataclasses.replace(cfg, loss=dataclasses.replace(cfg.loss, teacher=teacher))
        info = _rl(cfg, spec, start, d, progress, stop_at)
    else:
        info = _pipeline(cfg, spec, start, teacher, d)
    info.update(wall_s=time.time() - t0, key=key, base_weights=built[spec.base].get("weights", ""))
    atomic_write(d / "done.json", json.dumps(info, indent=1))
    return info


def base_identity(exp: Experiment, spec: ModelSpec, seed: int | None, weights: str = "") -> dict:
    """A base model as its declared identity, its weights neither read nor pretrained (``--page-only``
    reads cells and computes nothing from the base, so the local cache does not decide what the page
    finds): the ``build_model`` info with the base's key and the checkpoint path this cache holds or
    would hold (whose name the evaluation keys carry); ``weights``: the digest its finished models
    record (:func:`rlvr.experiments.base_weights.agreed_weights`), "" when unknown."""
    cfg = model_config(exp, spec, seed)
    return {"path": str(milestone_name(base_path(cfg.model, cfg.pretrain), spec.start)), "milestones": [],
            "wall_s": 0.0, "key": _base_key(cfg, spec), "weights": weights, "identity_only": True}


def _rl(cfg: RunConfig, spec: ModelSpec, start: str, d: Path, progress: str, stop_at: float | None = None) -> dict:
    every = max(1, cfg.train.steps // spec.milestones) if spec.milestones else 0
    cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, init_from=start),
                              train=dataclasses.replace(cfg.train, milestone_every=every))
    run = d / "run"
    last = latest_good_checkpoint(run) if is_run_dir(run) else None
    if last is None:
        shutil.rmtree(d, ignore_errors=True)
        train(cfg, run_dir=run, progress=progress, stop_at=stop_at)
    elif checkpoint_step(last) < cfg.train.steps:
        train(resume=run, progress=progress, stop_at=stop_at)  # a killed run continues from its last good checkpoint
    final = latest_good_checkpoint(run)
    if stop_at is not None and final is not None and checkpoint_step(final) < cfg.train.steps:
        raise RunPaused(f"{d.name}: paused at step {checkpoint_step(final)} of {cfg.train.steps}")
    kept = [str(c) for c in milestone_checkpoints(run) if c != final]
    return {"path": str(final), "milestones": kept, "run": str(run)}


def _pipeline(cfg: RunConfig, spec: ModelSpec, start: str, teacher: str, d: Path) -> dict:
    """SFT, SFT-Gold, distillation, SFT->RL or parallel averaging from ``start`` (one process, no
    resume: ``excursions.steps`` steps, minutes at most on the tiny model)."""
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    torch.manual_seed(cfg.train.seed)
    model, tok = load_policy_as(start, cfg.model)  # the run's dtype and fp32_logits, not the checkpoint's
    log = MetricsLog(d)
    steps = cfg.excursions.steps
    every = max(1, steps // spec.milestones) if spec.milestones else 0
    kept: list[str] = []

    def keep(step: int) -> None:  # evenly spaced checkpoints, the final one excluded
        if every and step % every == 0 and step < steps:
            save_policy(model, tok, d / "milestones" / f"step_{step:06d}")
            kept.append(str(d / "milestones" / f"step_{step:06d}"))

    try:
        pipeline = "rl" if spec.kind == "rl_steps" else spec.kind
        teacher = teacher or cfg.excursions.teacher  # no declared teacher: the config's checkpoint
        budget = run_pipeline(cfg, pipeline, model, tok, get_task(cfg), log, Path(teacher) if teacher else None,
                              keep)
    finally:
        log.close()
    save_policy(model, tok, d / "model")
    return {"path": str(d / "model"), "milestones": kept, "budget": budget}
