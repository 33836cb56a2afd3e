"""The curves section of a results page, for experiments whose claims read compute-performance
curves (:mod:`rlvr.experiments.curve_measures`): per RL model the sigmoid fitted to each seed's
held-out curve (mean and range over seeds), where its midpoint falls in the run and how much gain is
still to come; per model against its reference (the ``against`` of the claims that compare it, else
the first RL model declared) the differences in A, ln B and ln C_mid with intervals; plots of the
seed-mean curves with their fits, each model beside its reference."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np

from rlvr.analysis.curve_plots import CurveSeries, plot_curves
from rlvr.analysis.curves import sigmoid_curve
from rlvr.analysis.predictability import param_diff
from rlvr.errors import UserError
from rlvr.experiments.curve_measures import curve, fit_run
from rlvr.experiments.measures import MEASURES
from rlvr.experiments.page_plots import page_colours

SECTION = "Curves"
PER_PLOT = 4  # models drawn with the reference in one plot
MEAN_BOOT = 50  # bootstrap replicates of the fit drawn through a plotted mean curve


FRACTION_CAP = 10.0
"""A midpoint beyond 10x the run's compute is written ">1000%": such a fit (of a flat or falling
curve) puts C_mid anywhere, and its digits would swamp the column's mean."""


def _f(x, spec: str, cap: float | None = None) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    return f">{format(cap, spec)}" if cap is not None and x > cap else format(x, spec)


def _span(vals: list[float], spec: str, cap: float | None = None) -> str:
    """Mean over seeds, with the seeds' range when there are several; values above ``cap`` (and a mean
    above it) are written as ">cap"."""
    if not vals:
        return "-"
    m = float(np.mean(vals))
    if len(vals) == 1:
        return _f(m, spec, cap)
    return f"{_f(m, spec, cap)} ({_f(min(vals), spec, cap)}..{_f(max(vals), spec, cap)})"


def curve_lines(exp, seeds_of: Callable, load: Callable, out: Path) -> list[str]:
    """Markdown lines (empty unless a claim uses a curve measure); ``load(ev, model, seed)`` ->
    stats. Writes ``out/plots/curves_N.png``."""
    if not any(reads_curves(c) for c in exp.claims):
        return []
    evs = [e for e in exp.evaluations.values() if e.kind == "dynamics"]
    models = list(dict.fromkeys(m for e in evs for m in e.models))
    runs: dict[str, list] = {}  # model -> [(seed, C, R, fit, boot)]
    for m in models:
        ev = next(e for e in evs if m in e.models)
        for s in seeds_of(m):
            try:
                C, R = curve(load(ev, m, s))
                runs.setdefault(m, []).append((s, C, R, *fit_run(C, R, s)))
            except (FileNotFoundError, UserError):
                continue
    if not runs:
        return ["No run has its curve yet.", ""]
    lines = ["Per run: the sigmoid R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B) fitted to the held-out pass rate "
             "against training samples, R0 fixed to the first point (docs/methods/scaling_curves.md). Mean over "
             "seeds (range). *C_mid / run*: the midpoint as a fraction of the run's compute (beyond 10 runs: "
             ">1000%); *to come*: the fitted gain still ahead at the end, A - R(C_end), in points; *final*: mean "
             "of the last 3 evaluations.", "",
             "| model | seeds | final | A | B | C_mid (samples) | C_mid / run | to come (pts) | bent |",
             "|---|---|---|---|---|---|---|---|---|"]
    for m, rs in runs.items():
        finals = [float(R[-3:].mean()) for _, C, R, _, _ in rs]
        fits = [f for *_, f, _ in rs]
        frac = [f.C_mid / float(C[-1]) for (_, C, *_), f in zip(rs, fits)]
        come = [100 * (f.A - float(sigmoid_curve(float(C[-1]), f.R0, f.A, f.B, f.C_mid)))
                for (_, C, *_), f in zip(rs, fits)]
        lines.append(f"| {m} | {len(rs)} | {_span(finals, '.3f')} | {_span([f.A for f in fits], '.3f')} | "
                     f"{_span([f.B for f in fits], '.2f')} | {_span([f.C_mid for f in fits], '.3g')} | "
                     f"{_span(frac, '.0%', FRACTION_CAP)} | {_span(come, '.1f')} | "
                     f"{sum(f.bent for f in fits)} of {len(fits)} |")
    default = next((m for m in exp.models if exp.models[m].kind == "rl" and m in runs), None)
    refs = {}  # model -> the model it is compared with (the default while its own has no run yet)
    for m in runs:
        if m != default:
            r = reference(exp, m, default)
            refs[m] = r if r in runs and r != m else default
    if refs:
        lines += ["", "Against each model's reference (the model its claims compare it with, else "
                  f"`{default}`; mean over seeds; 95% interval resampling seeds and each fit's bootstrap "
                  "replicates):", "",
                  "| model | against | dA | d ln B | d ln C_mid |", "|---|---|---|---|---|"]
        for m, r in refs.items():
            ma, ra = ([(f, b) for *_, f, b in runs[x]] for x in (m, r))
            cols = []
            for param, log in (("A", False), ("B", True), ("C_mid", True)):
                d = param_diff(ma, ra, param, log=log)
                cols.append(f"{d.diff:+.3f} [{d.low:+.3f}, {d.high:+.3f}]")
            lines.append(f"| {m} | {r} | " + " | ".join(cols) + " |")
    lines += ["", *_plots(runs, refs, out, page_colours(exp)), ""]
    return lines


def reads_curves(claim) -> bool:
    """Whether ``claim``'s measure reads compute-performance curves (its registered section)."""
    return MEASURES[claim.measure].section == SECTION


def _mean_series(name: str, rs: list, colour: str | None = None) -> CurveSeries | None:
    """The seeds' mean curve (on the points all seeds evaluated) and its fit, for drawing."""
    n = min(C.size for _, C, *_ in rs)
    C = np.mean([C[:n] for _, C, *_ in rs], axis=0)
    R = np.mean([R[:n] for _, _, R, *_ in rs], axis=0)
    try:
        fit, boot = fit_run(C, R, 0, n_boot=MEAN_BOOT)
    except UserError:
        return None
    return CurveSeries(f"{name} (mean of {len(rs)})", C, R, np.ones(n, bool), fit, boot, color=colour)


def reference(exp, model: str, default: str | None) -> str | None:
    """The model ``model`` (not the default reference itself) is compared with: the ``against`` of the
    first curve claim on it that names one (e.g. an ablation on a length-bound variant against that
    variant), else ``default``."""
    for c in exp.claims:
        if reads_curves(c) and c.args.get("model") == model and c.args.get("against"):
            return c.args["against"]
    return default


def _plots(runs: dict, refs: dict[str, str], out: Path, colours: dict[str, str]) -> list[str]:
    """One plot per reference and up to PER_PLOT of the models compared with it (a model with no
    reference, e.g. the only one, is drawn alone); each model in its colour of the page."""
    by_ref: dict[str, list[str]] = {}
    for m, r in refs.items():
        by_ref.setdefault(r, []).append(m)
    groups = [(r, ms[i:i + PER_PLOT]) for r, ms in by_ref.items() for i in range(0, len(ms), PER_PLOT)]
    groups = groups or [(m, []) for m in runs][:1]
    lines = []
    for i, (r, g) in enumerate(groups, 1):
        series = [s for m in [r, *g] if (s := _mean_series(m, runs[m], colours.get(m))) is not None]
        if not series:
            continue
        p = plot_curves(series, out / "plots" / f"curves_{i}.png", x_label="training samples")
        lines.append(f"![curves {i}](plots/{p.name})")
    return lines
