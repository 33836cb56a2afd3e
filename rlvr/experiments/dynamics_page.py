"""The training-dynamics section of a results page: per model (mean over seeds), the sampled-token
entropy, pass rate and the cells' predicted entropy change through training, from ``kind: dynamics``
cells (:mod:`rlvr.experiments.dynamics_eval`), and a plot of each evaluation's held-out accuracy
against the step (one colour per model, the page's, one line per seed)."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

from rlvr.algo.diagnostics import CELLS
from rlvr.experiments.page_plots import new_axes, page_colours, save_axes

POINTS = 5  # windows through training


def windows(values: list, points: int = POINTS) -> list[float | None]:
    """Means of ``values`` (None skipped) over ``points`` equal consecutive windows."""
    n = len(values)
    out = []
    for i in range(points):
        w = [v for v in values[i * n // points:(i + 1) * n // points] if v is not None]
        out.append(sum(w) / len(w) if w else None)
    return out


def _f(x, spec: str) -> str:
    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x, spec)


def heldout_points(series: dict) -> tuple[list[int], list[float]]:
    """(steps, held-out accuracy) of a dynamics cell's series, the steps without a held-out point skipped."""
    pts = [(st, v) for st, v in zip(series["step"], series.get("heldout_pass_rate", [])) if v is not None]
    return [p[0] for p in pts], [p[1] for p in pts]


def _plot_heldout(name: str, runs: dict[str, list[dict]], out: Path, colours: dict[str, str]) -> Path | None:
    """``runs``: {model: [series per seed]} -> out/plots/heldout_<name>.png (None: no held-out point);
    ``colours``: the page's {model: colour}."""
    curves = {m: [heldout_points(s) for s in ss] for m, ss in runs.items()}
    curves = {m: [c for c in cs if c[0]] for m, cs in curves.items()}
    if not any(curves.values()):
        return None
    fig, ax = new_axes()
    for m, cs in curves.items():
        for j, (x, y) in enumerate(cs):
            ax.plot(x, y, "-", color=colours.get(m), lw=1.2, alpha=0.8, label=m if j == 0 else None)
    return save_axes(fig, ax, "RL step", "held-out accuracy", out / "plots" / f"heldout_{name}.png")


def dynamics_lines(exp, seeds_of: Callable, load: Callable, out: Path | None = None) -> list[str]:
    """Markdown lines (empty without a dynamics evaluation); ``load(ev, model, seed)`` -> stats.
    With ``out``, each evaluation's held-out accuracy is also plotted under out/plots/."""
    evs = [e for e in exp.evaluations.values() if e.kind == "dynamics"]
    if not evs:
        return []
    # every model once, in declaration order, loaded once (dynamics evaluations read the same runs)
    series = {m: _series_of(next(e for e in evs if m in e.models), m, seeds_of, load)
              for m in dict.fromkeys(m for e in evs for m in e.models)}
    plots = []
    for e in evs if out is not None else []:
        path = _plot_heldout(e.name, {m: series[m] for m in e.models}, out, page_colours(exp))
        if path is not None:
            plots.append(f"![held-out accuracy, {e.name}](plots/{path.name})")
    head = " | ".join(f"window {i + 1}" for i in range(POINTS))
    lines = [f"Training series (evaluations {', '.join(f'`{e.name}`' for e in evs)}): means over {POINTS} equal "
             "windows of the steps, then over seeds. Entropy: the sampled tokens' mean next-token entropy (nats); "
             "dH: the cells' predicted first-order entropy change summed over each window's steps.", "",
             f"| model | series | {head} |", "|---|---|" + "---|" * POINTS]
    for m, per_seed in series.items():
        if not per_seed:
            continue
        rows = [("entropy", "entropy", False), ("pass rate", "pass_rate", False)]
        rows += [(f"dH {c}", f"dH_{c}", True) for c in CELLS]
        for label, key, summed in rows:
            have = [s for s in per_seed if key in s]
            if not have:  # a series the cells did not record (e.g. a run without entropy diagnostics)
                continue
            w = [windows(s[key]) for s in have]
            if summed:  # sums per window: mean x the window's length
                w = [[None if v is None else v * len(s[key]) / POINTS for v in ws] for ws, s in zip(w, have)]
            cols = []
            for i in range(POINTS):
                vals = [ws[i] for ws in w if ws[i] is not None]
                cols.append(sum(vals) / len(vals) if vals else None)
            spec = ".2e" if summed else ".3f"
            lines.append(f"| {m} | {label} | " + " | ".join(_f(v, spec) for v in cols) + " |")
    return lines + [""] + (plots + [""] if plots else [])


def _series_of(ev, model: str, seeds_of: Callable, load: Callable) -> list[dict]:
    """The dynamics series of ``model``'s seeds that have a cell."""
    out = []
    for s in seeds_of(model):
        try:
            out.append(load(ev, model, s)["series"])
        except FileNotFoundError:
            continue
    return out
