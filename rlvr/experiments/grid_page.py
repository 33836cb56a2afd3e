"""The grid section of a results page, for experiments whose models start from several pretraining
checkpoints (``start``): each metric against the checkpoint, one line per pipeline (the model's kind),
the 95% bootstrap interval over problems shaded, and the same numbers as a table.

Metrics: pass@1 and pass@k_max of the experiment's own task (sampling evaluations without a
``task``), and greedy accuracy on each retention task (evaluations with a ``task``). A model enters
when it starts from the experiment's ``base`` (not another base, nor a base model with overrides of
its own, such as a 2x2's) and its evaluation exists; evaluations with an ``offset`` (validation blocks
for tuning) are left out.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from rlvr.eval.passk import bootstrap_ci
from rlvr.experiments.cells import cell_passk
from rlvr.experiments.page_plots import new_axes, page_colours, save_axes

LABEL = {"rl_steps": "rl"}


def _per_problem(stats: list[dict], k: int) -> np.ndarray | None:
    """(P,) per-problem pass@k averaged over the seeds' cells (None if k > n)."""
    rows = []
    for st in stats:
        if k > st["n"]:
            return None
        rows.append(cell_passk(st, [k])[:, 0])
    return np.mean(rows, axis=0)


def grid_lines(exp, seeds_of: Callable, load: Callable, out: Path) -> list[str]:
    """Markdown lines (empty unless models start from two or more checkpoints); ``load(ev, model,
    seed)`` -> stats. Writes ``out/plots/grid_<metric>.png``."""
    starts = {m.start for m in exp.models.values() if m.base == "base" and not (m.kind == "base" and m.overrides)}
    if len(starts) < 2:
        return []
    table: dict[str, dict[tuple[str, float], tuple[float, float, float]]] = {}
    for ev in exp.evaluations.values():
        if ev.kind != "samples" or ev.offset:  # an offset block validates (tunes); the grid reads the rest
            continue
        for name in ev.models:
            spec = exp.models[name]
            if spec.base != "base" or (spec.kind == "base" and spec.overrides):  # another base's line (a 2x2)
                continue
            try:
                stats = [load(ev, name, s) for s in seeds_of(name)]
            except FileNotFoundError:
                continue
            n = min(st["n"] for st in stats)
            metrics = [(f"{ev.task} accuracy", 1)] if ev.task else [("pass@1", 1), (f"pass@{n}", n)]
            for metric, k in metrics:
                pp = _per_problem(stats, k)
                if pp is None or not pp.size:
                    continue
                lo, hi = bootstrap_ci(pp)
                table.setdefault(metric, {})[(LABEL.get(spec.kind, spec.kind), spec.start)] = (float(pp.mean()),
                                                                                              float(lo), float(hi))
    if not table:
        return []
    lines = ["Each metric against the pretraining checkpoint the pipeline starts from (mean over seeds; 95% "
             "bootstrap interval over problems).", ""]
    xs = sorted(starts)
    colours = {LABEL.get(name, name): c for name, c in page_colours(exp).items()}  # lines are labelled kinds
    for metric, vals in table.items():
        kinds = list(dict.fromkeys(k for k, _ in vals))
        lines += [f"**{metric}**", "", "| pipeline | " + " | ".join(f"{x:.0%}" for x in xs) + " |",
                  "|---|" + "---|" * len(xs)]
        for kind in kinds:
            cells = [vals.get((kind, x)) for x in xs]
            lines.append(f"| {kind} | " + " | ".join("-" if c is None else f"{c[0]:.3f} [{c[1]:.3f}, {c[2]:.3f}]"
                                                    for c in cells) + " |")
        lines += ["", f"![{metric}](plots/{_plot(metric, vals, kinds, out, colours).name})", ""]
    return lines


def _plot(metric: str, vals: dict, kinds: list[str], out: Path, colours: dict[str, str]) -> Path:
    fig, ax = new_axes()
    for kind in kinds:
        pts = sorted((x, v) for (k, x), v in vals.items() if k == kind)
        x = [p[0] for p in pts]
        m, lo, hi = (np.array([p[1][i] for p in pts]) for i in range(3))
        (line,) = ax.plot(x, m, "o-", label=kind, color=colours.get(kind))
        ax.fill_between(x, lo, hi, color=line.get_color(), alpha=0.15, lw=0)
    path = out / "plots" / f"grid_{metric.replace('@', '_at_').replace(' ', '_')}.png"
    return save_axes(fig, ax, "pretraining checkpoint (fraction of the budget)", metric, path)
