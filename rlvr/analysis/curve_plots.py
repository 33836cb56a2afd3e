"""PNG plot of compute-performance curves: measured points, fitted and extrapolated
sigmoids with bootstrap prediction bands, several runs overlaid on a log-x axis."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rlvr.analysis.curves import CurveBootstrap, CurveFit, predict


@dataclass(frozen=True)
class CurveSeries:
    """One run to draw. C, R: (N,) all measured points; ``used``: (N,) bool, the points
    the fit saw; ``fit_until``: last compute of the fit range (None = all data); ``color``: the
    colour to draw it in (None: the next of matplotlib's cycle), so a page can keep one colour per
    run across its figures."""

    name: str
    C: np.ndarray
    R: np.ndarray
    used: np.ndarray
    fit: CurveFit
    boot: CurveBootstrap | None = None
    fit_until: float | None = None
    color: str | None = None


def _x_range(series: list[CurveSeries], predict_at: float | None) -> tuple[float, float]:
    pos = np.concatenate([s.C[s.C > 0] for s in series])
    lo, hi = float(pos.min()), float(pos.max())
    if predict_at is not None and predict_at > 0:
        lo, hi = min(lo, predict_at), max(hi, predict_at)
    return lo, hi


def _draw_one(ax, s: CurveSeries, color, lo: float, hi: float) -> None:
    later = ~s.used & (s.C > (s.fit_until if s.fit_until is not None else np.inf))
    dropped = ~s.used & ~later
    label = f"{s.name}: A={s.fit.A:.3f} B={s.fit.B:.2f}" + ("" if s.fit.bent else " (not bent)")
    ax.plot(s.C[s.used], s.R[s.used], "o", color=color, ms=4, label=label)
    ax.plot(s.C[later], s.R[later], "^", mfc="none", color=color, ms=6)
    ax.plot(s.C[dropped & (s.C > 0)], s.R[dropped & (s.C > 0)], ".", color="0.6", ms=4)
    edge = min(max(s.fit_until if s.fit_until is not None else hi, lo), hi)
    for a, b, style in ((lo, edge, "-"), (edge, hi, "--")):
        if b <= a:
            continue
        xs = np.geomspace(a, b, 100)
        value, low, high = predict(s.fit, xs, s.boot)
        ax.plot(xs, value, style, color=color, lw=1.5)
        if s.boot is not None:
            ax.fill_between(xs, low, high, color=color, alpha=0.15, lw=0)
    ax.axhline(s.fit.A, color=color, lw=0.6, ls=":")


def plot_curves(
    series: list[CurveSeries],
    out_path: str | Path,
    *,
    x_label: str = "compute",
    predict_at: float | None = None,
) -> Path:
    """Draw every series on one log-x axis and save a PNG; returns the path.

    Filled circles: points used for the fit; hollow triangles: held-out points after
    fit_until; grey dots: points below min_compute; solid line: fitted curve; dashed:
    extrapolation; band: bootstrap prediction interval; dotted: asymptote A."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lo, hi = _x_range(series, predict_at)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for k, s in enumerate(series):
        _draw_one(ax, s, s.color or colors[k % len(colors)], lo, hi)
    if predict_at is not None:
        ax.axvline(predict_at, color="0.5", lw=0.8, ls="-.")
    ax.set_xscale("log")
    ax.set_xlabel(x_label)
    ax.set_ylabel("held-out pass rate")
    ax.set_title("R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
