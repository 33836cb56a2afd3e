"""Training-curve figures: one metric group against the RL step (left) and cumulative compute
(right), one colour per run or group of seeds (from the page's colour map), smoothed, raw faint
behind, a seed band where a group has several runs.

``groups``: {label: [metrics rows of each run]}. A group of one run draws that run; a group of
several draws, at the steps every run logged, the mean over runs (compute: the runs' mean FLOPs at
that step) with the min..max range of the runs shaded. Keys whose every series is constant (all
zero, or one value throughout) carry no signal: :func:`flat_keys` finds them and the page hides a
panel made only of them, saying so in a line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rlvr.analysis.smoothing import Smoothing
from rlvr.report.figures import LEGEND_SIZE, Rows, finite, pyplot, series

STYLES = ("-", "--", ":", "-.")
SPARSE_POINTS = 30  # fewer logged points than this: markers on the line


def flat_value(groups: Mapping[str, Sequence[Rows]], key: str) -> list[float] | None:
    """The constants of ``key`` when every run that logged it logged one value throughout (sorted,
    distinct), else None. None too when no run logged it."""
    values = set()
    for runs in groups.values():
        for rows in runs:
            ys = series(rows, "step", key)[1]
            if ys and max(ys) != min(ys):
                return None
            values.update(ys)
    return sorted(values) or None


def flat_keys(groups: Mapping[str, Sequence[Rows]], keys: Sequence[str]) -> dict[str, list[float]]:
    """{key: its constant value(s)} for the keys of ``keys`` that are constant in every run."""
    return {k: v for k in keys if (v := flat_value(groups, k)) is not None}


def seed_curve(runs: Sequence[Rows], x: str, key: str) -> tuple[np.ndarray, ...] | None:
    """(xs, mean, low, high), each (S,), over the S steps at which every run logged ``x`` and ``key``;
    low/high: the min and max over runs (equal to the mean for one run). None when no step is shared."""
    per_run = [{r["step"]: (float(r[x]), float(r[key])) for r in rows
                if finite(r.get("step")) and finite(r.get(x)) and finite(r.get(key))} for rows in runs]
    shared = sorted(set.intersection(*(set(s) for s in per_run))) if per_run else []
    if not shared:
        return None
    xs_R_S = np.array([[steps[s][0] for s in shared] for steps in per_run])  # (R, S)
    ys_R_S = np.array([[steps[s][1] for s in shared] for steps in per_run])  # (R, S)
    return xs_R_S.mean(0), ys_R_S.mean(0), ys_R_S.min(0), ys_R_S.max(0)


def _legend_label(label: str, runs: Sequence[Rows], key: str, several_keys: bool) -> str:
    seeds = f" ({len(runs)} runs)" if len(runs) > 1 else ""
    return f"{label}{seeds}: {key}" if several_keys else f"{label}{seeds}"


def _draw(ax: Any, curve: tuple[np.ndarray, ...], colour: str, style: str, label: str,
          smoothing: Smoothing, several: bool) -> None:
    xs, mean, low, high = curve
    marker = "o" if xs.size < SPARSE_POINTS else None
    if several:
        ax.fill_between(xs, low, high, color=colour, alpha=0.15, lw=0)
    if smoothing.kind != "none" and xs.size > 1:
        ax.plot(xs, mean, style, color=colour, lw=0.8, alpha=0.3)  # raw, faint, behind
        ax.plot(xs, smoothing.apply(mean), style, color=colour, lw=1.8, label=label)
    else:
        ax.plot(xs, mean, style, color=colour, marker=marker, ms=3, lw=1.6, label=label)


def curve_axes(groups: Mapping[str, Sequence[Rows]], keys: Sequence[str], title: str,
               colours: Mapping[str, str], smoothing: Smoothing) -> Any:
    """A two-panel matplotlib figure (step | FLOPs) of ``keys`` for every group; None when no run
    logged any of them. One colour per group (``colours[label]``), one line style per key; the
    legend has one entry per group (``label: key`` for a group of several keys)."""
    keys = [k for k in keys if any(series(rows, "step", k)[0] for runs in groups.values() for rows in runs)]
    if not keys:
        return None
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11.0, 3.4))
    fig.subplots_adjust(left=0.07, right=0.99, bottom=0.16, top=0.88, wspace=0.2)
    for label, runs in groups.items():
        for j, key in enumerate(keys):
            name = _legend_label(label, runs, key, len(keys) > 1)
            for ax, x in zip(axes, ("step", "flops")):
                curve = seed_curve(runs, x, key)
                if curve is not None:
                    _draw(ax, curve, colours[label], STYLES[j % len(STYLES)], name, smoothing, len(runs) > 1)
    for ax, xl in zip(axes, ("step", "compute (FLOPs)")):
        ax.set_xlabel(xl)
        ax.set_ylabel(title)
        ax.grid(alpha=0.3)
    with_lines = [ax for ax in axes if ax.get_lines()]
    with_lines[-1].legend(fontsize=LEGEND_SIZE, loc="best", framealpha=0.85)
    fig.suptitle(title, fontsize=11)
    return fig
