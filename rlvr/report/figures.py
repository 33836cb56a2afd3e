"""Figures of the HTML run report, each returned as a base64 PNG data URI (``data:image/png;...``).

Every function takes plain data (run name -> eval.json dict, ...) and the page's colour map
(:func:`rlvr.report.colours.colour_map`: one colour per run on every panel), overlays all runs on
the same axes (legend = run name) and returns None when nothing it would draw was logged. The
training curves are in :mod:`rlvr.report.curve_figures`. matplotlib is imported lazily with the
Agg backend.
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
_DPI = 90
LEGEND_SIZE = 9


def pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def png_data_uri(png: bytes) -> str:
    """PNG bytes -> ``data:image/png;base64,...``."""
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def fig_uri(fig: Any) -> str:
    buf = io.BytesIO()  # margins are set per figure: tight_layout would cost an extra draw
    fig.savefig(buf, format="png", dpi=_DPI)
    pyplot().close(fig)
    return png_data_uri(buf.getvalue())


def finite(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def series(rows: Rows, x: str, key: str) -> tuple[list[float], list[float]]:
    """(xs, ys) of the rows where both ``x`` and ``key`` are finite numbers, in row order."""
    xs, ys = [], []
    for r in rows:
        if finite(r.get(x)) and finite(r.get(key)):
            xs.append(float(r[x]))
            ys.append(float(r[key]))
    return xs, ys


def logged_keys(runs: Mapping[str, Rows], keys: Sequence[str]) -> list[str]:
    """The keys that at least one run logged as a number on at least one line."""
    return [k for k in keys if any(series(rows, "step", k)[0] for rows in runs.values())]


def pair_models(result: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """eval.json -> {"base": block, "trained": block} for a pair, {"model": block} for one model."""
    if "base" in result and "trained" in result:
        return {"base": result["base"], "trained": result["trained"]}
    return {"model": result} if "pass_at_k" in result else {}


def passk_figure(evals: Mapping[str, Mapping[str, Any]], colours: Mapping[str, str],
                 title: str = "pass@k, base (dashed) vs trained (solid), 95% bootstrap CI") -> str | None:
    """pass@k against k (log2 axis): per run, base (dashed) and trained (solid) with 95% CI bands."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    fig.subplots_adjust(left=0.11, right=0.98, bottom=0.14, top=0.9)
    drawn, top = 0, 0.0
    for name, result in evals.items():
        for model, block in pair_models(result).items():
            pk = block.get("pass_at_k") or {}
            ks = sorted(int(k) for k in pk)
            if not ks:
                continue
            color = colours[name]
            style = "--" if model == "base" else "-"
            label = name if len(evals) > 1 and model == "model" else f"{name}: {model}"
            ax.plot(ks, [pk[str(k)] for k in ks], style, marker="o", ms=3, color=color, label=label)
            ci = block.get("pass_at_k_ci") or {}
            top = max(top, *(pk[str(k)] for k in ks), *(ci[str(k)][1] for k in ks if str(k) in ci))
            if all(str(k) in ci for k in ks):
                ax.fill_between(ks, [ci[str(k)][0] for k in ks], [ci[str(k)][1] for k in ks],
                                color=color, alpha=0.25 if model == "base" else 0.15, lw=0)
            drawn += 1
        cross = (result.get("crossover") or {}).get("k")  # only the beyond-the-interval rule, not legacy crossover_k
        if cross is not None:
            ax.axvline(cross, color=colours[name], ls=":", lw=1,
                       label=f"{name}: base above trained (95%) from k={cross}")
    if not drawn:
        plt.close(fig)
        return None
    ax.set_xscale("log", base=2)
    ax.set_xlabel("k (samples per problem)")
    ax.set_ylabel("pass@k")
    ax.set_ylim(0, min(1.02, 1.15 * top + 0.02))  # the curves fill the panel; never above 1
    ax.grid(alpha=0.3)
    ax.legend(fontsize=LEGEND_SIZE, loc="best", framealpha=0.85)
    ax.set_title(title, fontsize=9)
    return fig_uri(fig)


def support_figure(supports: Mapping[str, Mapping[str, Any]], categories: Sequence[str],
                   colours: Mapping[str, str]) -> str | None:
    """Grouped bars: problems per support category (preserved/shrunk/expanded/out_of_support), per run."""
    supports = {n: s for n, s in supports.items() if s.get("counts")}
    if not supports:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 3.2))
    fig.subplots_adjust(left=0.11, right=0.98, bottom=0.12, top=0.9)
    width = 0.8 / len(supports)
    for i, (name, s) in enumerate(supports.items()):
        xs = [c + (i - (len(supports) - 1) / 2) * width for c in range(len(categories))]
        bars = ax.bar(xs, [s["counts"].get(c, 0) for c in categories], width=width,
                      color=colours[name], label=f"{name} (n={s.get('n')})")
        ax.bar_label(bars, fontsize=8)
    ax.set_xticks(range(len(categories)), list(categories))
    ax.set_ylabel("problems")
    ax.legend(fontsize=LEGEND_SIZE)
    ax.set_title("support: which problems base / trained solve at least once in n samples", fontsize=9)
    return fig_uri(fig)


def difference_figure(differences: Mapping[str, Mapping[str, Any]], reference: str,
                      colours: Mapping[str, str]) -> str | None:
    """pass@k difference (other - ``reference``) against k (log2 axis), one line per other group in its
    colour, the 95% paired bootstrap interval shaded; None when no group has a pass@k difference.

    ``differences``: {label: :func:`rlvr.report.differences.paired_differences` result}."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    fig.subplots_adjust(left=0.13, right=0.98, bottom=0.14, top=0.9)
    drawn = 0
    for label, diff in differences.items():
        rows = [r for r in diff["rows"] if r["metric"].startswith("pass@") and r["difference"] is not None]
        if not rows:
            continue
        ks = [int(r["metric"][5:]) for r in rows]
        ax.plot(ks, [r["difference"] for r in rows], "-", marker="o", ms=4, lw=1.8, color=colours[label],
                label=f"{label} - {reference}")
        if all(r["ci"] for r in rows):
            ax.fill_between(ks, [r["ci"][0] for r in rows], [r["ci"][1] for r in rows], color=colours[label],
                            alpha=0.18, lw=0)
        drawn += 1
    if not drawn:
        plt.close(fig)
        return None
    ax.axhline(0, color="0.3", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("k (samples per problem)")
    ax.set_ylabel(f"pass@k difference vs {reference}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=LEGEND_SIZE, loc="best", framealpha=0.85)
    ax.set_title("paired pass@k difference, 95% bootstrap interval over problems", fontsize=9)
    return fig_uri(fig)


def scaling_figure(curves: Sequence[Any], x_label: str = "compute (FLOPs)") -> str | None:
    """The ScaleRL sigmoid fit plot of :func:`rlvr.analysis.curve_plots.plot_curves` as a data URI.

    ``curves``: :class:`rlvr.analysis.curve_plots.CurveSeries`, one per run (None if empty)."""
    if not curves:
        return None

    with tempfile.TemporaryDirectory() as tmp:
        path = plot_curves(list(curves), Path(tmp) / "fit.png", x_label=x_label)
        return png_data_uri(path.read_bytes())
