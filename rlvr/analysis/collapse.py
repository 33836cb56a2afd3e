"""The model-collapse step of an intrinsic-reward run, and the rise and fall (docs/methods/unsupervised_rlvr.md).

Unsupervised RLVR (2603.08660) trains on a label-free proxy reward; ground-truth
accuracy first rises, then falls once the proxy stops agreeing with correctness.
The **model collapse step** is the first step at which reward accuracy (the share of
rollouts whose proxy reward equals their ground-truth reward) falls below 1%. The
paper's smoothing is not published; here a run has collapsed at the first step whose
trailing moving average over ``window`` points (full windows only) is below
``threshold``. ``window=1`` is the unsmoothed rule. A later collapse means a stronger
prior and predicts larger gains from supervised RLVR.

Pure numpy over plain rows (dicts, e.g. the lines of a metrics.jsonl); no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np

ACCURACY_KEYS = ("heldout_pass_rate", "accuracy", "gt_accuracy")
"""Where held-out ground-truth accuracy is read from, first present wins: an rlvr
metrics.jsonl's held-out evaluation lines, a plain ``accuracy`` column, or (fallback)
the training batch's ground-truth accuracy."""


@dataclass(frozen=True)
class CollapseResult:
    """What :func:`analyse_run` finds in one run. Accuracies are None when the run has none."""

    collapse_step: int | None  # first step with smoothed reward accuracy < threshold; None = no collapse
    collapsed: bool
    peak_step: int | None  # step of the highest accuracy (first one on ties)
    peak_accuracy: float | None
    final_accuracy: float | None  # last accuracy measured
    final_step: int  # last step of the run (any row)
    proxy_at_collapse: float | None  # proxy reward (``reward`` column) at the collapse step
    rise_then_fall: bool  # peak accuracy is >= margin above both the first and the final accuracy
    accuracy_key: str | None  # which column the accuracies came from

    def to_dict(self) -> dict:
        return asdict(self)


def _is_number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def trailing_mean(x: np.ndarray, window: int, partial: bool = False) -> np.ndarray:
    """Trailing moving average: out[i] = mean(x[i-window+1 : i+1]).

    x: (N,). With ``partial=False`` the first window-1 entries are NaN (no full window);
    with ``partial=True`` they average the points available so far.
    """
    if window < 1:
        raise ValueError(f"window={window} must be >= 1")
    x = np.asarray(x, dtype=np.float64)
    c = np.concatenate([[0.0], np.cumsum(x)])
    idx = np.arange(len(x))
    lo = np.maximum(idx - window + 1, 0)
    out = (c[idx + 1] - c[lo]) / (idx + 1 - lo)
    if not partial:
        out[: window - 1] = np.nan
    return out


def collapse_step(
    steps: Sequence[int], reward_accuracy: Sequence[float], window: int = 3, threshold: float = 0.01
) -> int | None:
    """First step at which the trailing mean of ``window`` reward-accuracy points is < threshold.

    steps, reward_accuracy: (N,), in training order. Returns None if it never is (or
    the run has fewer than ``window`` points).
    """
    if len(steps) != len(reward_accuracy):
        raise ValueError(f"{len(steps)} steps but {len(reward_accuracy)} reward accuracies")
    if not math.isfinite(threshold):
        raise ValueError(f"threshold={threshold} must be finite")
    smooth = trailing_mean(np.asarray(reward_accuracy, dtype=np.float64), window)
    below = np.flatnonzero(smooth < threshold)  # NaN compares False
    return int(steps[below[0]]) if below.size else None


def _series(rows: Sequence[Mapping], key: str) -> tuple[list[int], list[float]]:
    """(steps, values) of the rows that have a finite number under ``key``; last row wins per step."""
    by_step: dict[int, float] = {}
    for row in rows:
        v = row.get(key)
        if _is_number(v) and "step" in row:
            by_step[int(row["step"])] = float(v)
    steps = sorted(by_step)
    return steps, [by_step[s] for s in steps]


def _rise_then_fall(acc: list[float], margin: float) -> bool:
    if len(acc) < 3:
        return False
    peak = max(acc)
    return peak - acc[0] >= margin and peak - acc[-1] >= margin


def analyse_run(
    rows: Sequence[Mapping], window: int = 3, threshold: float = 0.01, margin: float = 0.05
) -> CollapseResult:
    """Collapse step, peak and final accuracy of one run.

    rows: dicts with ``step`` and ``reward_accuracy`` (lines without it are skipped),
    optionally accuracy (see :data:`ACCURACY_KEYS`) and the proxy ``reward``. Rows may
    come in any order; a step logged twice (a resumed run) keeps its last row.
    ``rise_then_fall``: the peak accuracy is at least ``margin`` (absolute) above both
    the first and the final accuracy (raw values: held-out evaluations are sparse, so
    pick a margin above their noise). Raises ValueError when no row has a reward accuracy.
    """
    steps, ra = _series(rows, "reward_accuracy")
    if not steps:
        raise ValueError("no row has a numeric 'reward_accuracy'")
    cstep = collapse_step(steps, ra, window, threshold)
    key = next((k for k in ACCURACY_KEYS if _series(rows, k)[0]), None)
    acc_steps, acc = _series(rows, key) if key else ([], [])
    peak = int(np.argmax(acc)) if acc else None
    proxy = dict(zip(*_series(rows, "reward")))
    all_steps = [int(r["step"]) for r in rows if _is_number(r.get("step"))]
    return CollapseResult(
        collapse_step=cstep,
        collapsed=cstep is not None,
        peak_step=acc_steps[peak] if peak is not None else None,
        peak_accuracy=acc[peak] if peak is not None else None,
        final_accuracy=acc[-1] if acc else None,
        final_step=max(all_steps),
        proxy_at_collapse=proxy.get(cstep) if cstep is not None else None,
        rise_then_fall=_rise_then_fall(acc, margin),
        accuracy_key=key,
    )


def rank_runs(results: Mapping[str, CollapseResult]) -> list[str]:
    """Run names, most trainable first: a later collapse = a stronger prior.

    Runs that never collapsed rank first (longer runs first, then higher peak
    accuracy): they only bound the collapse step from below, so compare runs of equal
    length. Then collapsed runs by collapse step, latest first. Ties: higher peak
    accuracy, then name.
    """

    def sort_key(name: str) -> tuple:
        r = results[name]
        peak = r.peak_accuracy if r.peak_accuracy is not None else -math.inf
        when = r.final_step if r.collapse_step is None else r.collapse_step
        return (r.collapsed, -when, -peak, name)

    return sorted(results, key=sort_key)
