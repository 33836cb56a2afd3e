"""Figures of the HTML run report, each returned as a base64 PNG data URI (``data:image/png;...``).

Every function takes plain data (run name -> metrics rows, or run name -> eval.json dict),
overlays all runs on the same axes (legend = run name) and returns None when nothing it
would draw was logged. matplotlib is imported lazily with the Agg backend.
"""

from __future__ import annotations

import base64
import io
import math
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rlvr.analysis.curve_plots import plot_curves

Rows = Sequence[Mapping[str, Any]]
_STYLES = ("-", "--", ":", "-.")
_DPI = 80


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def png_data_uri(png: bytes) -> str:
    """PNG bytes -> ``data:image/png;base64,...``."""
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _fig_uri(fig: Any) -> str:
    buf = io.BytesIO()  # margins are set per figure: tight_layout would cost an extra draw
    fig.savefig(buf, format="png", dpi=_DPI)
    _pyplot().close(fig)
    return png_data_uri(buf.getvalue())


def _colors() -> list[str]:
    return _pyplot().rcParams["axes.prop_cycle"].by_key()["color"]


def _finite(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def series(rows: Rows, x: str, key: str) -> tuple[list[float], list[float]]:
    """(xs, ys) of the rows where both ``x`` and ``key`` are finite numbers, in row order."""
    xs, ys = [], []
    for r in rows:
        if _finite(r.get(x)) and _finite(r.get(key)):
            xs.append(float(r[x]))
            ys.append(float(r[key]))
    return xs, ys


def logged_keys(runs: Mapping[str, Rows], keys: Sequence[str]) -> list[str]:
    """The keys that at least one run logged as a number on at least one line."""
    return [k for k in keys if any(series(rows, "step", k)[0] for rows in runs.values())]


def metric_axes(runs: Mapping[str, Rows], keys: Sequence[str], title: str) -> Any:
    """A matplotlib figure with two panels, the metric(s) against ``step`` (left) and cumulative
    ``flops`` (right); None if no key was logged.

    One colour per run, one line style per key (e.g. clip_frac_low solid, clip_frac_high
    dashed); the line label is the run name (``run: key`` for a group of several keys).
    Sparse metrics (held-out evaluations) get markers."""
    several = len(keys) > 1
    keys = logged_keys(runs, keys)
    if not keys:
        return None
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11.0, 3.2))
    fig.subplots_adjust(left=0.07, right=0.99, bottom=0.16, top=0.88, wspace=0.22)
    colors = _colors()
    for i, (name, rows) in enumerate(runs.items()):
        for j, key in enumerate(keys):
            label = f"{name}: {key}" if several else name
            for ax, x in zip(axes, ("step", "flops")):
                xs, ys = series(rows, x, key)
                if not xs:
                    continue
                marker = "o" if len(xs) < 30 else None
                ax.plot(xs, ys, _STYLES[j % len(_STYLES)], color=colors[i % len(colors)], marker=marker,
                        ms=3, lw=1.3, label=label)
    for ax, xl in zip(axes, ("step", "compute (FLOPs)")):
        ax.set_xlabel(xl)
        ax.set_ylabel(title)
        ax.grid(alpha=0.3)
    with_lines = [ax for ax in axes if ax.get_lines()]
    with_lines[-1].legend(fontsize=7, loc="best")
    fig.suptitle(title, fontsize=10)
    return fig


def metric_figure(runs: Mapping[str, Rows], keys: Sequence[str], title: str) -> str | None:
    """:func:`metric_axes` as a PNG data URI (None if no key was logged)."""
    fig = metric_axes(runs, keys, title)
    return None if fig is None else _fig_uri(fig)


def pair_models(result: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """eval.json -> {"base": block, "trained": block} for a pair, {"model": block} for one model."""
    if "base" in result and "trained" in result:
        return {"base": result["base"], "trained": result["trained"]}
    return {"model": result} if "pass_at_k" in result else {}


def passk_figure(evals: Mapping[str, Mapping[str, Any]]) -> str | None:
    """pass@k against k (log2 axis): per run, base (dashed) and trained (solid) with 95% CI bands."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    fig.subplots_adjust(left=0.11, right=0.98, bottom=0.14, top=0.9)
    colors, drawn = _colors(), 0
    for i, (name, result) in enumerate(evals.items()):
        for model, block in pair_models(result).items():
            pk = block.get("pass_at_k") or {}
            ks = sorted(int(k) for k in pk)
            if not ks:
                continue
            color = colors[i % len(colors)]
            style = "--" if model == "base" else "-"
            label = name if len(evals) > 1 and model == "model" else f"{name}: {model}"
            ax.plot(ks, [pk[str(k)] for k in ks], style, marker="o", ms=3, color=color, label=label)
            ci = block.get("pass_at_k_ci") or {}
            if all(str(k) in ci for k in ks):
                ax.fill_between(ks, [ci[str(k)][0] for k in ks], [ci[str(k)][1] for k in ks],
                                color=color, alpha=0.25 if model == "base" else 0.15, lw=0)
            drawn += 1
        cross = (result.get("crossover") or {}).get("k")  # only the beyond-the-interval rule, not legacy crossover_k
        if cross is not None:
            ax.axvline(cross, color=colors[i % len(colors)], ls=":", lw=1,
                       label=f"{name}: base above trained (95%) from k={cross}")
    if not drawn:
        plt.close(fig)
        return None
    ax.set_xscale("log", base=2)
    ax.set_xlabel("k (samples per problem)")
    ax.set_ylabel("pass@k")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    ax.set_title("pass@k, base (dashed) vs trained (solid), 95% bootstrap CI", fontsize=9)
    return _fig_uri(fig)


def support_figure(supports: Mapping[str, Mapping[str, Any]], categories: Sequence[str]) -> str | None:
    """Grouped bars: problems per support category (preserved/shrunk/expanded/out_of_support), per run."""
    supports = {n: s for n, s in supports.items() if s.get("counts")}
    if not supports:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 3.2))
    fig.subplots_adjust(left=0.11, right=0.98, bottom=0.12, top=0.9)
    colors, width = _colors(), 0.8 / len(supports)
    for i, (name, s) in enumerate(supports.items()):
        xs = [c + (i - (len(supports) - 1) / 2) * width for c in range(len(categories))]
        bars = ax.bar(xs, [s["counts"].get(c, 0) for c in categories], width=width,
                      color=colors[i % len(colors)], label=f"{name} (n={s.get('n')})")
        ax.bar_label(bars, fontsize=7)
    ax.set_xticks(range(len(categories)), list(categories))
    ax.set_ylabel("problems")
    ax.legend(fontsize=7)
    ax.set_title("support: which problems base / trained solve at least once in n samples", fontsize=9)
    return _fig_uri(fig)


def scaling_figure(curves: Sequence[Any], x_label: str = "compute (FLOPs)") -> str | None:
    """The ScaleRL sigmoid fit plot of :func:`rlvr.analysis.curve_plots.plot_curves` as a data URI.

    ``curves``: :class:`rlvr.analysis.curve_plots.CurveSeries`, one per run (None if empty)."""
    if not curves:
        return None

    with tempfile.TemporaryDirectory() as tmp:
        path = plot_curves(list(curves), Path(tmp) / "fit.png", x_label=x_label)
        return png_data_uri(path.read_bytes())
