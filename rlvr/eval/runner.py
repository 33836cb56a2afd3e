"""Base-vs-trained evaluation of a run: held-out pass@k, support, entropies,
perplexity under the base, and general-ability retention (:mod:`rlvr.eval.retention`).
Writes ``samples.jsonl``, ``base_samples.jsonl``, ``eval.json`` and plots."""

from __future__ import annotations

import json
from pathlib import Path

from rlvr.config import RunConfig
from rlvr.eval.generate import perplexity_of_rows, samples_for
from rlvr.eval.plots import plot_all
from rlvr.eval.retention import retention, retention_delta
from rlvr.eval.samples import write_samples
from rlvr.eval.summary import compare
from rlvr.log import Progress, warn
from rlvr.machine import machine_info
from rlvr.model.io import load_policy, resolve_device
from rlvr.model.precision import apply_dtype, config_spec, resolve_dtype
from rlvr.paths import atomic_write
from rlvr.tasks.base import task_equivalence
from rlvr.tasks.registry import get_task


def evaluate_pair(cfg: RunConfig, base_ckpt: str | Path, trained_ckpt: str | Path, out_dir: str | Path,
                  task=None, progress: str = "none") -> dict:
    """Sample both models on the same held-out problems and compare them; returns eval.json (with
    the ``machine`` it ran on). Both compute in the run's ``model.dtype``, resolved as training
    resolves it (the base checkpoint is saved float32, whatever the run's precision). ``progress``:
    the :class:`rlvr.log.Progress` mode of one display per stage (sampling each model, perplexity,
    retention); none by default."""
    out = Path(out_dir)
    task = task or get_task(cfg.task.name, **cfg.task.knobs)
    problems = task.problems("heldout", cfg.train.eval_problems)
    n = cfg.train.final_eval_samples
    device = resolve_device(cfg.train.device)
    precision = resolve_dtype(cfg.model.dtype, device, lambda: config_spec(cfg.model))
    base, tok = load_policy(base_ckpt, device=cfg.train.device)
    trained, _ = load_policy(trained_ckpt, device=cfg.train.device)
    for model in (base, trained):
        apply_dtype(model, precision.dtype)
    rows = {}
    for name, model in (("base", base), ("trained", trained)):
        rows[name] = samples_for(model, tok, task, problems, n, cfg.sampling, cfg.train.seed + 101, progress=progress,
                                 desc=f"eval: sample {name} model, {len(problems)} problems x {n}")
    base_rows, trained_rows = rows["base"], rows["trained"]
    write_samples(out / "base_samples.jsonl", base_rows)
    write_samples(out / "samples.jsonl", trained_rows)
    bar = _bar(len(base_rows) + len(trained_rows), "eval: perplexity under the base", progress, "completions")
    ppl = {"trained": perplexity_of_rows(base, tok, trained_rows, bar.update),
           "base": perplexity_of_rows(base, tok, base_rows, bar.update)}
    bar.close()
    result = compare(base_rows, trained_rows, perplexity_under_base=ppl, seed=cfg.train.seed,
                     equal=task_equivalence(task))  # maj@n pools answers as the task compares them
    n_ret, seed = cfg.task.retention_problems, cfg.train.seed
    tasks = cfg.task.retention_tasks
    bar = _bar(2 if tasks else 0, f"eval: retention ({', '.join(tasks)})", progress, "models")
    ret = {}
    for name, model in (("base", base), ("trained", trained)):
        ret[name] = retention(model, tok, cfg, n_ret, seed)
        bar.update()
    bar.close()
    ret["delta"] = {name: retention_delta(ret["base"][name], r, seed) for name, r in ret["trained"].items()}
    result["retention"] = ret
    result["machine"] = machine_info(precision.dtype, device)
    atomic_write(out / "eval.json", json.dumps(result, indent=2))
    try:
        plot_all(result, out / "plots")
    except Exception as e:  # noqa: BLE001 - a plot must never lose the numbers

        warn(f"eval plots failed: {e}")
    return result


def _bar(total: int, desc: str, progress: str, unit: str) -> Progress:
    """A stage's display: about ten plain lines, or a bar."""
    return Progress(total, desc, progress if total else "none", every=max(1, total // 10), unit=unit)
