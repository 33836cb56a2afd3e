"""The training-dynamics section of a results page: per model (mean over seeds), the sampled-token
entropy, pass rate and the cells' predicted entropy change through training, from ``kind: dynamics``
cells (:mod:`rlvr.experiments.dynamics_eval`)."""

from __future__ import annotations

import math
from collections.abc import Callable

from rlvr.algo.diagnostics import CELLS

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


def dynamics_lines(exp, seeds_of: Callable, load: Callable) -> list[str]:
    """Markdown lines (empty without a dynamics evaluation); ``load(ev, model, seed)`` -> stats."""
    evs = [e for e in exp.evaluations.values() if e.kind == "dynamics"]
    if not evs:
        return []
    head = " | ".join(f"window {i + 1}" for i in range(POINTS))
    lines = [f"Training series (evaluations {', '.join(f'`{e.name}`' for e in evs)}): means over {POINTS} equal "
             "windows of the steps, then over seeds. Entropy: the sampled tokens' mean next-token entropy (nats); "
             "dH: the cells' predicted first-order entropy change summed over each window's steps.", "",
             f"| model | series | {head} |", "|---|---|" + "---|" * POINTS]
    for m in dict.fromkeys(m for e in evs for m in e.models):  # every model once, in declaration order
        ev = next(e for e in evs if m in e.models)
        per_seed = []
        for s in seeds_of(m):
            try:
                per_seed.append(load(ev, m, s)["series"])
            except FileNotFoundError:
                continue
        if not per_seed:
            continue
        rows = [("entropy", "entropy", False), ("pass rate", "pass_rate", False)]
        rows += [(f"dH {c}", f"dH_{c}", True) for c in CELLS]
        for label, key, summed in rows:
            w = [windows(s[key]) for s in per_seed]
            if summed:  # sums per window: mean x the window's length
                w = [[None if v is None else v * len(s[key]) / POINTS for v in ws] for ws, s in zip(w, per_seed)]
            cols = []
            for i in range(POINTS):
                vals = [ws[i] for ws in w if ws[i] is not None]
                cols.append(sum(vals) / len(vals) if vals else None)
            spec = ".2e" if summed else ".3f"
            lines.append(f"| {m} | {label} | " + " | ".join(_f(v, spec) for v in cols) + " |")
    return lines + [""]
