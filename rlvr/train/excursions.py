"""RL excursions during pretraining (docs/methods/excursions.md): a grid of pretraining checkpoints x
post-training pipelines, each cell trained on the same budget and evaluated the same way.

Pipelines (from a checkpoint M_t; S = ``excursions.steps`` optimiser steps, R = P*G rows):

    rl           S RL steps (the trainer's :func:`rl_step`)                     S*R policy samples
    sft          S SFT steps on one gold solution per problem, R pairs a step    S*R gold pairs
    sft_gold     S SFT steps on every gold solution                              S*R gold pairs
    sft_then_rl  S/2 SFT steps (``excursions.sft_data``), then S/2 RL steps       both, halved
    parallel     S averaged updates theta += w d_RL + (1-w) d_SFT (own AdamWs)   S*R + S*R
    distill      the teacher samples S*R completions (G per train problem); the verified-right
                 ones are the SFT data of S student steps                        S*R teacher samples

The teacher (``excursions.teacher``) defaults to the ``rl`` cell of the last milestone (an
RL-trained final-pretraining model). Every cell is evaluated on held-out target problems
(pass@1/8/32 from ``eval_samples`` samples at ``eval_temperature``) and on the retention tasks
(greedy accuracy: general ability). A cell directory with ``done.json`` for the same config is
reused; ``excursions.out_dir`` holding anything else (another folder's files, cells finished under
another config) is refused unless ``overwrite`` (:func:`claim_out_dir`).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

from rlvr.config import EXCURSION_PIPELINES, RunConfig, config_hash, dump_yaml, to_dict
from rlvr.errors import UserError
from rlvr.eval.generate import samples_for
from rlvr.eval.passk import bootstrap_ci, pass_at_k_matrix
from rlvr.eval.retention import retention_eval, retention_task
from rlvr.log import MetricsLog
from rlvr.model.io import load_policy_as, save_policy
from rlvr.paths import atomic_write, claim_new_dir
from rlvr.train.averaging import parallel_step
from rlvr.train.pretrain import base_model
from rlvr.train.sft import batches, distill_pairs, sft_loss, sft_optimizer, sft_pairs, sft_update
from rlvr.train.state import build_state, get_task, resolve_precision
from rlvr.train.step import rl_step

KS = (1, 8, 32)
Note = Callable[[str], None]


# ----------------------------------------------------------------------------- inputs
def milestone_dirs(cfg: RunConfig, progress: str = "none") -> dict[float, Path]:
    """{fraction: checkpoint dir} of the cached pretraining run (pretrains on first use)."""
    have = {round(m, 2) for m in cfg.pretrain.milestones} | {1.0}
    missing = [m for m in cfg.excursions.milestones if round(m, 2) not in have]
    if missing:
        raise UserError(f"excursions.milestones {missing} are not pretraining milestones {sorted(have)}; "
                        "add them to pretrain.milestones (this re-pretrains) or pick from that list")
    root = base_model(cfg.model, cfg.pretrain, progress).parent
    total = json.loads((root / "pretrain.json").read_text())["steps"]
    # pretraining names a milestone by its realised fraction round(m * total) / total
    return {m: root / f"milestone_{max(1, round(m * total)) / total:.2f}" for m in cfg.excursions.milestones}


def sft_batch_size(cfg: RunConfig) -> int:
    return cfg.excursions.sft_batch_size or cfg.algo.prompts_per_step * cfg.algo.group_size


def train_problems(cfg: RunConfig, task) -> list:
    return task.problems("train", cfg.task.train_size or None)


def cell_key(cfg: RunConfig, pipeline: str, start: Path, teacher: Path | None) -> str:
    """Hash of everything a cell's result depends on (not the grid's layout)."""
    d = to_dict(cfg)
    for k in ("name", "log", "pipeline"):
        d.pop(k, None)
    d["train"] = {"seed": cfg.train.seed}
    layout = ("out_dir", "milestones", "pipelines")
    d["excursions"] = {k: v for k, v in d["excursions"].items() if k not in layout}
    return config_hash({"cfg": d, "pipeline": pipeline, "start": str(start),
                        "teacher": str(teacher) if pipeline == "distill" else ""})


# ----------------------------------------------------------------------------- phases
class Counters:
    """Budget actually spent by a pipeline (the table states it)."""

    def __init__(self):
        self.opt_steps = self.policy_samples = self.teacher_samples = self.sft_pairs = 0
        self.extra: dict = {}

    def as_dict(self) -> dict:
        return {"opt_steps": self.opt_steps, "policy_samples": self.policy_samples,
                "teacher_samples": self.teacher_samples, "sft_pairs": self.sft_pairs, **self.extra}


def rl_phase(cfg: RunConfig, model, tok, steps: int, log: MetricsLog, c: Counters) -> None:
    """``steps`` optimiser steps of RL (a fresh RL AdamW), one metrics line per RL step."""
    st = build_state(cfg, model, tok)
    per = cfg.algo.minibatches * cfg.algo.ppo_epochs
    n = max(1, steps // per)
    for _ in range(n):
        before = st.samples
        m = rl_step(st, n)
        c.opt_steps += per
        c.policy_samples += st.samples - before
        log.write({**m, "phase": "rl", "step": c.opt_steps, "policy_samples": c.policy_samples})


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


def parallel_phase(cfg: RunConfig, model, tok, pairs: list, steps: int, log: MetricsLog, c: Counters) -> None:
    """``steps`` averaged updates: RL (own AdamW) and SFT (own AdamW) from the same theta."""
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
    ``on_step``: called after each SFT step of the sft, sft_gold and distill pipelines."""
    S, c = cfg.excursions.steps, Counters()
    golds = lambda mode: sft_pairs(train_problems(cfg, task), mode)  # noqa: E731
    if pipeline == "rl":
        rl_phase(cfg, model, tok, S, log, c)
    elif pipeline in ("sft", "sft_gold"):
        sft_phase(cfg, model, tok, golds(pipeline), S, log, c, on_step)
    elif pipeline == "sft_then_rl":
        sft_phase(cfg, model, tok, golds(cfg.excursions.sft_data), S // 2, log, c)
        rl_phase(cfg, model, tok, S - S // 2, log, c)
    elif pipeline == "parallel":
        parallel_phase(cfg, model, tok, golds(cfg.excursions.sft_data), S, log, c)
    elif pipeline == "distill":
        if teacher is None:
            raise UserError("the distill pipeline needs a teacher; set excursions.teacher")
        sft_phase(cfg, model, tok, distill_data(cfg, task, teacher, c), S, log, c, on_step)
    elif pipeline != "base":
        raise UserError(f"unknown pipeline {pipeline!r}; use base or one of {', '.join(EXCURSION_PIPELINES)}")
    return c.as_dict()


# ----------------------------------------------------------------------------- evaluation
def evaluate_policy(cfg: RunConfig, model, tok, task) -> dict:
    """pass@k (k in KS, k <= eval_samples) on held-out target problems, mean response length, and
    for each retention task the greedy accuracy and the per-token NLL of its gold answers."""
    ex = cfg.excursions
    problems = task.problems("heldout", ex.eval_problems)
    sampling = dataclasses.replace(cfg.sampling, temperature=ex.eval_temperature, top_p=1.0, top_k=0)
    rows = samples_for(model, tok, task, problems, ex.eval_samples, sampling, cfg.train.seed + 7)
    n = ex.eval_samples
    correct = [sum(r["correct"] for r in rows[i * n : (i + 1) * n]) for i in range(len(problems))]
    ks = [k for k in KS if k <= n]
    per = pass_at_k_matrix([n] * len(problems), correct, ks)  # (P, K)
    lo, hi = bootstrap_ci(per, seed=cfg.train.seed)
    out = {f"pass@{k}": float(v) for k, v in zip(ks, per.mean(0))}
    out.update({f"pass@{k}_ci": [float(a), float(b)] for k, a, b in zip(ks, lo, hi)})
    out["response_len"] = sum(r["num_tokens"] for r in rows) / max(1, len(rows))
    for name in cfg.task.retention_tasks:
        rt = retention_task(cfg, name)
        rp = rt.problems("heldout", ex.retention_problems)
        r = retention_eval(model, tok, rt, rp, cfg.train.seed)
        out[f"retention_{name}"] = r["accuracy"]
        out[f"retention_{name}_ci"] = r["ci"]
        with torch.no_grad():  # likelihood of the gold answers: moves even where accuracy is 0
            out[f"retention_{name}_nll"] = float(sft_loss(model, tok, [(p.prompt, p.solutions[0]) for p in rp]))
    return out


# ----------------------------------------------------------------------------- cells and grid
def cell_dir(cfg: RunConfig, milestone: float, pipeline: str) -> Path:
    return Path(cfg.excursions.out_dir) / f"m{milestone:.2f}" / pipeline


def read_done(d: Path, key: str) -> dict | None:
    """The stored result of a finished cell with this key, else None."""
    f = d / "done.json"
    if not f.exists():
        return None
    try:
        res = json.loads(f.read_text())
    except json.JSONDecodeError:
        return None
    return res if res.get("key") == key else None


def run_cell(cfg: RunConfig, milestone: float, pipeline: str, start: Path, teacher: Path | None,
             note: Note | None = None) -> dict:
    """Train + evaluate one cell (or reuse its ``done.json``) -> its result row."""
    d = cell_dir(cfg, milestone, pipeline)
    key = cell_key(cfg, pipeline, start, teacher)
    done = read_done(d, key)
    if done is not None:
        return {**done, "reused": True}
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    atomic_write(d / "config.yaml", dump_yaml(cfg))
    t0 = time.time()
    torch.manual_seed(cfg.train.seed)
    model, tok = load_policy_as(start, cfg.model)
    task = get_task(cfg)
    log = MetricsLog(d)
    try:
        budget = run_pipeline(cfg, pipeline, model, tok, task, log, teacher)
    finally:
        log.close()
    train_s = time.time() - t0
    if pipeline != "base":
        save_policy(model, tok, d / "model")
    res = {"milestone": milestone, "pipeline": pipeline, **budget, **evaluate_policy(cfg, model, tok, task),
           "train_s": train_s, "wall_s": time.time() - t0, "start": str(start), "key": key}
    if pipeline == "distill":
        res["teacher"] = str(teacher)
    atomic_write(d / "done.json", json.dumps(res, indent=1))
    if note:
        note(f"{pipeline:12s} m={milestone:.2f} pass@1={res.get('pass@1', 0):.3f} wall={res['wall_s']:.0f}s")
    return {**res, "reused": False}


def grid_cells(cfg: RunConfig) -> list[tuple[float, str]]:
    """Run order: the default teacher (rl at the last milestone) first, then milestone by milestone,
    each starting with its ``base`` (untrained) row."""
    ex = cfg.excursions
    last = max(ex.milestones)
    cells = [(m, p) for m in sorted(ex.milestones) for p in ("base", *ex.pipelines)]
    if "distill" in ex.pipelines and not ex.teacher:
        cells = [(last, "rl")] + [c for c in cells if c != (last, "rl")]
    return cells


def claim_out_dir(cfg: RunConfig, keys: dict[tuple[float, str], str], overwrite: bool = False,
                  note: Note | None = None) -> None:
    """``excursions.out_dir`` as this grid's folder: missing, empty or an excursions grid whose
    finished cells (``done.json``) all have this config's ``keys`` ({(milestone, pipeline): key}).
    Anything else is a UserError naming it, unless ``overwrite``: a folder that is no grid is emptied
    (:func:`rlvr.paths.claim_new_dir`); cells of another config are recomputed, with a note."""
    out = Path(cfg.excursions.out_dir)
    if not out.is_dir() or not any(out.iterdir()):
        return
    is_grid = (out / "table.json").is_file() or any(out.glob("m*/*/config.yaml"))
    if not is_grid:
        claim_new_dir(out, overwrite, "excursions.out_dir")
        return
    other = []
    for (m, pipeline), key in keys.items():
        f = cell_dir(cfg, m, pipeline) / "done.json"
        if f.is_file() and read_done(cell_dir(cfg, m, pipeline), key) is None:
            other.append(f"m{m:.2f}/{pipeline}")
    if not other:
        return
    if not overwrite:
        raise UserError(f"excursions.out_dir {out} holds cells finished under another config ({', '.join(other)}); "
                        "give another excursions.out_dir, or pass --overwrite to recompute them")
    if note:
        note(f"--overwrite: recomputing {len(other)} cells of another config: {', '.join(other)}")


def run_grid(cfg: RunConfig, progress: str = "none", note: Note | None = None, overwrite: bool = False) -> dict:
    """Every (milestone, pipeline) cell (finished ones reused); writes table.json and table.md.
    ``model.dtype=auto`` is resolved once, here, so every cell (and its key) names the precision it ran in.
    A folder that holds anything else is refused unless ``overwrite`` (:func:`claim_out_dir`)."""
    cfg, prec = resolve_precision(cfg)
    if note:
        note(prec.line())
    starts = milestone_dirs(cfg, progress)
    ex = cfg.excursions
    teacher = Path(ex.teacher) if ex.teacher else cell_dir(cfg, max(ex.milestones), "rl") / "model"
    if ex.teacher and not teacher.exists():
        raise UserError(f"excursions.teacher={ex.teacher}: no such checkpoint; give a directory with a model")
    claim_out_dir(cfg, {(m, p): cell_key(cfg, p, starts[m], teacher) for m, p in grid_cells(cfg)}, overwrite,
                  note or (lambda line: print(line, file=sys.stderr)))
    t0 = time.time()
    rows = [run_cell(cfg, m, p, starts[m], teacher, note) for m, p in grid_cells(cfg)]
    order = ("base", *ex.pipelines)
    rows.sort(key=lambda r: (r["milestone"], order.index(r["pipeline"]) if r["pipeline"] in order else 99))
    out = Path(ex.out_dir)
    table = {"config": to_dict(cfg), "teacher": str(teacher), "rows": rows, "wall_s": time.time() - t0,
             "budget_note": budget_note(cfg)}
    atomic_write(out / "table.json", json.dumps(table, indent=1))
    atomic_write(out / "table.md", markdown_table(table))
    return table


# ----------------------------------------------------------------------------- outputs
def budget_note(cfg: RunConfig) -> str:
    ex, R = cfg.excursions, cfg.algo.prompts_per_step * cfg.algo.group_size
    return (f"Budget per pipeline: {ex.steps} optimiser steps; RL steps use {R} policy samples "
            f"(P={cfg.algo.prompts_per_step} x G={cfg.algo.group_size}), "
            f"SFT steps {sft_batch_size(cfg)} pairs; "
            f"distill: the teacher draws {ex.steps * R} samples (the RL generation budget). Evaluation: "
            f"{ex.eval_problems} held-out problems x {ex.eval_samples} samples at T={ex.eval_temperature}; "
            f"retention = greedy accuracy and gold-answer NLL (nats/token, lower is better) on "
            f"{ex.retention_problems} held-out problems of {', '.join(cfg.task.retention_tasks)}.")


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
