"""Does a held-out curve fall at the end of training? The fitted change over the last third.

A periodic held-out evaluation gives points (step_i, p_i), each a pass rate over n_i Bernoulli
draws (problems x samples), so var(p_i) = p_i (1 - p_i) / n_i. Over the points whose step is at or
after ``start_frac`` of training (default: the last third), the least-squares slope is

    b = sum_i (s_i - s_bar)(p_i - p_bar) / sum_i (s_i - s_bar)^2
    var(b) = sum_i (s_i - s_bar)^2 var(p_i) / (sum_i (s_i - s_bar)^2)^2   (independent points)

and the change over that window is b * (s_last - s_first), with a 95% normal interval. The curve
*falls* when the whole interval is below 0: a drop larger than the evaluation noise explains. A
single noisy low point cannot make it fall; a steady decline across the window does.
See docs/methods/testbed.md.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

Z95 = 1.959963984540054


def last_part_change(steps: Sequence[float], rates: Sequence[float], n: int | Sequence[int],
                     total_steps: float | None = None, start_frac: float = 2 / 3) -> dict:
    """The fitted change of the curve over its last part.

    ``steps``, ``rates``: (E,) evaluation steps and pass rates; ``n``: draws behind each rate (one
    int for all, or (E,)); ``total_steps``: the run's length (default: the last step);
    ``start_frac``: the window starts at ``start_frac * total_steps``.

    Returns {"points", "change", "lo", "hi", "falls"}: the number of points in the window, the
    fitted change and its 95% interval (None with fewer than 2 points), and ``falls`` (hi < 0).
    """
    if len(steps) != len(rates):
        raise ValueError(f"steps and rates differ in length ({len(steps)} vs {len(rates)})")
    ns = [n] * len(steps) if isinstance(n, int) else list(n)
    if len(ns) != len(steps) or any(k < 1 for k in ns):
        raise ValueError("n must be >= 1, one per point")
    if not 0 <= start_frac < 1:
        raise ValueError(f"start_frac must be in [0, 1), got {start_frac}")
    end = total_steps if total_steps is not None else (max(steps) if steps else 0)
    pts = sorted((float(s), float(p), k) for s, p, k in zip(steps, rates, ns) if s >= start_frac * end)
    if len(pts) < 2:
        return {"points": len(pts), "change": None, "lo": None, "hi": None, "falls": False}
    s_bar = sum(s for s, _, _ in pts) / len(pts)
    p_bar = sum(p for _, p, _ in pts) / len(pts)
    sxx = sum((s - s_bar) ** 2 for s, _, _ in pts)
    if sxx == 0:
        return {"points": len(pts), "change": None, "lo": None, "hi": None, "falls": False}
    slope = sum((s - s_bar) * (p - p_bar) for s, p, _ in pts) / sxx
    var = sum((s - s_bar) ** 2 * p * (1 - p) / k for s, p, k in pts) / sxx**2
    span = pts[-1][0] - pts[0][0]
    change, half = slope * span, Z95 * math.sqrt(var) * span
    return {"points": len(pts), "change": change, "lo": change - half, "hi": change + half,
            "falls": change + half < 0}
