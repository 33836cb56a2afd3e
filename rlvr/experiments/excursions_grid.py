"""``rlvr excursions`` over the experiment framework: the grid of pretraining milestones x pipelines
(docs/methods/excursions.md) as an in-memory :class:`~rlvr.experiments.spec.Experiment`, run by
:func:`~rlvr.experiments.runner.run_experiment` (its models' cell cache, its evaluations), and the
grid's table read from the cells.

The experiment (one seed: the config's ``train.seed``):

- models: ``base`` (the final pretrained base, the framework's reference) and, per milestone m and
  pipeline p, ``m<m>_<p>`` (:func:`model_name`): the pretraining checkpoint itself for the ``base`` row,
  else a model of kind p started from it (``rl`` -> ``rl_steps``: ``excursions.steps`` RL optimiser
  steps, the budget of the others). Without ``excursions.teacher`` the distill teacher is the ``rl``
  model of the last milestone, declared (so trained) first;
- evaluations: ``target`` (``eval_problems`` held-out problems x ``eval_samples`` samples at
  ``eval_temperature``: pass@k) and ``retention_<task>`` per ``task.retention_tasks`` (greedy on
  ``retention_problems`` held-out problems, with the gold answers' NLL under the model).

Under ``excursions.out_dir``: ``models/<model>/`` and ``evals/<protocol>/<model>/`` (the framework's
cells, each reused while its key matches), then ``table.json`` and ``table.md``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from rlvr.config import ExcursionsGrid, RunConfig, to_dict
from rlvr.errors import UserError
from rlvr.eval.passk import bootstrap_ci
from rlvr.experiments.cells import cell_passk
from rlvr.experiments.runner import eval_dir, load_stats, run_experiment
from rlvr.experiments.spec import EvalSpec, Experiment, ModelSpec
from rlvr.paths import atomic_write, claim_new_dir
from rlvr.train.excursions import sft_batch_size
from rlvr.train.state import resolve_precision

KS = (1, 8, 32)
BUDGET = ("opt_steps", "policy_samples", "teacher_samples", "sft_pairs")
"""The spent-budget counters of a row (a base row spends nothing)."""
KIND = {"rl": "rl_steps"}
"""The model kind of a pipeline where its name differs (the framework's ``rl`` is the train loop)."""
Note = Callable[[str], None]


def model_name(milestone: float, pipeline: str) -> str:
    """The model of one grid cell, e.g. ``m0.25_sft``."""
    return f"m{milestone:.2f}_{pipeline}"


def grid_cells(cfg: RunConfig, grid: ExcursionsGrid) -> list[tuple[float, str]]:
    """(milestone, pipeline) of every row in build order: the default teacher (rl at the last milestone)
    first where distill needs it, then milestone by milestone, each starting with its ``base`` row."""
    cells = [(m, p) for m in sorted(grid.milestones) for p in ("base", *grid.pipelines)]
    teacher = default_teacher(cfg, grid)
    return cells if teacher is None else [teacher] + [c for c in cells if c != teacher]


def default_teacher(cfg: RunConfig, grid: ExcursionsGrid) -> tuple[float, str] | None:
    """The cell whose model teaches distill (rl at the last milestone), or None: no distill row, or the
    config names a teacher checkpoint (``excursions.teacher``)."""
    if "distill" not in grid.pipelines or cfg.excursions.teacher:
        return None
    return (max(grid.milestones), "rl")


def grid_experiment(cfg: RunConfig, grid: ExcursionsGrid, config: str, overrides: list[str]) -> Experiment:
    """The grid as an experiment whose models load ``config`` with ``overrides`` (``cfg`` is that config,
    loaded: its retention tasks and teacher shape the experiment)."""
    teacher = default_teacher(cfg, grid)
    models = {"base": ModelSpec(name="base", kind="base")}
    for m, p in grid_cells(cfg, grid):
        name = model_name(m, p)
        if p == "base":
            models[name] = ModelSpec(name=name, kind="base", start=m)
        else:
            taught = p == "distill" and teacher is not None
            models[name] = ModelSpec(name=name, kind=KIND.get(p, p), start=m,
                                     teacher=model_name(*teacher) if taught else "")
    rows = tuple(model_name(m, p) for m, p in grid_cells(cfg, grid))
    evaluations = {"target": EvalSpec(name="target", temperature=grid.eval_temperature, top_p=1.0,
                                      n=grid.eval_samples, problems=grid.eval_problems, models=rows)}
    for task in cfg.task.retention_tasks:
        evaluations[f"retention_{task}"] = EvalSpec(name=f"retention_{task}", temperature=0.0, top_p=1.0, n=1,
                                                    problems=grid.retention_problems, task=task, gold_nll=True,
                                                    models=rows)
    return Experiment(name="excursions-grid", title="rlvr excursions: pretraining milestones x pipelines",
                      config=config, overrides=tuple(overrides), seeds=1, models=models, evaluations=evaluations,
                      claims=())


def check_milestones(cfg: RunConfig, grid: ExcursionsGrid) -> None:
    """UserError unless every grid milestone is a pretraining milestone (before anything pretrains)."""
    have = {round(m, 2) for m in cfg.pretrain.milestones} | {1.0}
    missing = [m for m in grid.milestones if round(m, 2) not in have]
    if missing:
        raise UserError(f"excursions.milestones {missing} are not pretraining milestones {sorted(have)}; "
                        "add them to pretrain.milestones (this re-pretrains) or pick from that list")


def claim_out_dir(cfg: RunConfig, grid: ExcursionsGrid, overwrite: bool = False, note: Note | None = None) -> None:
    """``grid.out_dir`` as this grid's folder: missing, empty, or a grid folder of the same config and
    grid (its ``table.json``). Anything else is a UserError naming it, unless ``overwrite``: a folder
    that is no grid is emptied (:func:`rlvr.paths.claim_new_dir`); a grid of another config is
    recomputed where its cells' keys differ, with a note."""
    out = Path(grid.out_dir)
    if not out.is_dir() or not any(out.iterdir()):
        return
    table = out / "table.json"
    if not table.is_file() and not (out / "models").is_dir():
        claim_new_dir(out, overwrite, "excursions.out_dir")
        return
    try:
        old = json.loads(table.read_text()) if table.is_file() else {}
    except (OSError, ValueError):
        old = {}
    if old.get("config") == to_dict(cfg) and old.get("grid") == to_dict(grid):
        return
    if not overwrite:
        raise UserError(f"excursions.out_dir {out} holds a grid of another config (or one that did not finish "
                        "writing its table.json); give another excursions.out_dir, or pass --overwrite to "
                        "recompute its cells")
    if note:
        note(f"--overwrite: {out} holds a grid of another config; its cells are recomputed where their keys differ")


def run_grid(cfg: RunConfig, grid: ExcursionsGrid, config: str, overrides: list[str], progress: str = "none",
             note: Note | None = None, overwrite: bool = False) -> dict:
    """Build and evaluate every (milestone, pipeline) cell (finished cells reused); writes table.json and
    table.md under ``grid.out_dir`` -> the table. ``model.dtype=auto`` is resolved once, here, and given
    to every model (so its key names the precision it ran in). A model that failed (e.g. a teacher with
    no right sample) leaves its row out: UserError after the table is written. ``grid.out_dir`` holding
    anything else is refused unless ``overwrite`` (:func:`claim_out_dir`)."""
    check_milestones(cfg, grid)
    cfg, precision = resolve_precision(cfg)
    claim_out_dir(cfg, grid, overwrite, note)
    if note:
        note(precision.line())
    exp = grid_experiment(cfg, grid, config, [*overrides, f"model.dtype={cfg.model.dtype}"])
    out = Path(grid.out_dir)
    before = _stamps(exp, out)
    t0 = time.time()
    result = run_experiment(exp, out, seeds=1, progress=progress)
    after = _stamps(exp, out)
    built = result["built"]
    teacher = _teacher_path(cfg, grid, built)
    rows = [grid_row(exp, out, m, p, built, cfg.train.seed, teacher, reused=_reused(before, after, model_name(m, p)))
            for m, p in grid_cells(cfg, grid) if model_name(m, p) in built]
    order = ("base", *grid.pipelines)
    rows.sort(key=lambda r: (r["milestone"], order.index(r["pipeline"]) if r["pipeline"] in order else 99))
    table = {"config": to_dict(cfg), "grid": to_dict(grid), "teacher": teacher, "rows": rows,
             "failed": result["failed"], "wall_s": time.time() - t0, "budget_note": budget_note(cfg, grid)}
    atomic_write(out / "table.json", json.dumps(table, indent=1))
    atomic_write(out / "table.md", markdown_table(table))
    if result["failed"]:
        raise UserError("; ".join(f"{m}: {why}" for m, why in result["failed"].items())
                        + f" (the table in {out / 'table.md'} has the other cells)")
    return table


def _teacher_path(cfg: RunConfig, grid: ExcursionsGrid, built: dict[str, dict]) -> str:
    teacher = default_teacher(cfg, grid)
    if teacher is None:
        return cfg.excursions.teacher
    return built.get(model_name(*teacher), {}).get("path", "")


def _stamps(exp: Experiment, out: Path) -> dict[str, list]:
    """{model: the modification times (None: absent) of its done.json and its evaluations' stats.json}."""
    def stamp(path: Path) -> int | None:
        return path.stat().st_mtime_ns if path.exists() else None

    stamps = {}
    for name, spec in exp.models.items():
        files = [] if spec.kind == "base" else [out / "models" / name / "done.json"]  # a base has no record
        files += [eval_dir(out, ev, name, None) / "stats.json" for ev in exp.evaluations.values()]
        stamps[name] = [stamp(f) for f in files]
    return stamps


def _reused(before: dict, after: dict, name: str) -> bool:
    """Whether a row's cells were all on disk before this run and none was written again."""
    return None not in before[name] and before[name] == after[name]


def grid_row(exp: Experiment, out: Path, milestone: float, pipeline: str, built: dict[str, dict], seed: int,
             teacher: str, reused: bool) -> dict:
    """One row of the table from its cells: the spent budget, pass@k with 95% bootstrap intervals over
    problems (``seed``), each retention task's greedy accuracy (with its interval) and gold-answer NLL."""
    name = model_name(milestone, pipeline)
    info = built[name]
    row: dict = {"milestone": milestone, "pipeline": pipeline, **dict.fromkeys(BUDGET, 0), **info.get("budget", {})}
    stats = load_stats(out, exp.evaluations["target"], name, None)
    ks = [k for k in KS if k <= stats["n"]]
    per = cell_passk(stats, ks)  # (P, K)
    lo, hi = bootstrap_ci(per, seed=seed)
    row.update({f"pass@{k}": float(v) for k, v in zip(ks, per.mean(0))})
    row.update({f"pass@{k}_ci": [float(a), float(b)] for k, a, b in zip(ks, lo, hi)})
    for ev in (e for e in exp.evaluations.values() if e.task):
        st = load_stats(out, ev, name, None)
        correct = np.asarray(st["correct"], float)
        r_lo, r_hi = bootstrap_ci(correct, seed=seed)
        row.update({ev.name: float(correct.mean()), f"{ev.name}_ci": [float(r_lo), float(r_hi)],
                    f"{ev.name}_nll": float(np.mean(st["gold_nll"]))})
    row.update(wall_s=info["wall_s"], start=built[model_name(milestone, "base")]["path"], key=info["key"],
               reused=reused)
    if pipeline == "distill":
        row["teacher"] = teacher
    return row


# ----------------------------------------------------------------------------- outputs
def budget_note(cfg: RunConfig, grid: ExcursionsGrid) -> str:
    ex, rows = cfg.excursions, cfg.algo.prompts_per_step * cfg.algo.group_size
    return (f"Budget per pipeline: {ex.steps} optimiser steps; RL steps use {rows} policy samples "
            f"(P={cfg.algo.prompts_per_step} x G={cfg.algo.group_size}), "
            f"SFT steps {sft_batch_size(cfg)} pairs; "
            f"distill: the teacher draws {ex.steps * rows} samples (the RL generation budget). Evaluation: "
            f"{grid.eval_problems} held-out problems x {grid.eval_samples} samples at T={grid.eval_temperature}; "
            f"retention = greedy accuracy and gold-answer NLL (nats/token, lower is better) on "
            f"{grid.retention_problems} held-out problems of {', '.join(cfg.task.retention_tasks)}. "
            "wall s: the seconds its model took to build (a base row: to find or pretrain the base).")


def metric_names(rows: list[dict]) -> list[str]:
    keys = [f"pass@{k}" for k in KS] + sorted({k for r in rows for k in r if k.startswith("retention_")
                                                      and not k.endswith("_ci")})
    return [k for k in keys if any(k in r for r in rows)]


def table_cells(table: dict) -> tuple[list[str], list[list[str]]]:
    """(column names, formatted rows) of the grid's table: one row per cell."""
    rows = table["rows"]
    metrics = metric_names(rows)
    head = ["milestone", "pipeline", *metrics, "opt steps", "policy samples", "teacher samples", "SFT pairs",
            "wall s"]
    cells = [[f"{r['milestone']:.2f}", r["pipeline"], *(f"{r[m]:.3f}" if m in r else "-" for m in metrics),
              str(r["opt_steps"]), str(r["policy_samples"]), str(r["teacher_samples"]), str(r["sft_pairs"]),
              f"{r['wall_s']:.0f}"] for r in rows]
    return head, cells


def markdown_table(table: dict) -> str:
    head, cells = table_cells(table)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(vals) + " |" for vals in cells]
    return "\n".join(lines) + f"\n\n{table['budget_note']}\n"
