"""Smoothing of a logged series for display: an exponential moving average or a trailing rolling mean.

Both take the values in step order, (N,), and return (N,) floats; neither looks ahead, so the
smoothed value at a step uses only that step and the ones before it. The figures draw the raw
series faintly behind the smoothed one, so smoothing never hides a point.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rlvr.errors import UserError

KINDS = ("ema", "mean", "none")


def ema(values: Sequence[float] | np.ndarray, span: int) -> np.ndarray:
    """Debiased exponential moving average, alpha = 2 / (span + 1): (N,) -> (N,).

    s_t = sum_{i<=t} (1-alpha)^(t-i) y_i / sum_{i<=t} (1-alpha)^(t-i), the weighted mean of the
    values so far (TensorBoard's debiased form: the first value is not pulled towards 0)."""
    y = np.asarray(values, dtype=np.float64).reshape(-1)
    if span < 1:
        raise UserError(f"smoothing span must be >= 1, got {span}; pass --window 1 or more")
    alpha = 2.0 / (span + 1)
    out = np.empty_like(y)
    weighted, weight = 0.0, 0.0
    for i, value in enumerate(y):
        weighted = (1 - alpha) * weighted + value
        weight = (1 - alpha) * weight + 1.0
        out[i] = weighted / weight
    return out


def rolling_mean(values: Sequence[float] | np.ndarray, window: int) -> np.ndarray:
    """Trailing mean over the last ``window`` values (fewer at the start): (N,) -> (N,)."""
    y = np.asarray(values, dtype=np.float64).reshape(-1)
    if window < 1:
        raise UserError(f"rolling-mean window must be >= 1, got {window}; pass --window 1 or more")
    sums = np.concatenate([[0.0], np.cumsum(y)])
    ends = np.arange(1, y.size + 1)
    starts = np.maximum(0, ends - window)
    return (sums[ends] - sums[starts]) / (ends - starts)


@dataclass(frozen=True)
class Smoothing:
    """How curves are smoothed: ``kind`` ema | mean | none, over ``window`` logged points."""

    kind: str = "ema"
    window: int = 5

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise UserError(f"smoothing must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if self.window < 1:
            raise UserError(f"smoothing window must be >= 1, got {self.window}")

    def apply(self, values: Sequence[float] | np.ndarray) -> np.ndarray:
        """The smoothed series, (N,) -> (N,)."""
        if self.kind == "ema":
            return ema(values, self.window)
        if self.kind == "mean":
            return rolling_mean(values, self.window)
        return np.asarray(values, dtype=np.float64).reshape(-1)

    def describe(self) -> str:
        """The rule in words, for captions ("EMA, span 5 (alpha 0.33)")."""
        if self.kind == "ema":
            return f"EMA, span {self.window} (alpha {2 / (self.window + 1):.2f}), debiased"
        if self.kind == "mean":
            return f"trailing rolling mean over {self.window} logged points"
        return "not smoothed"


DEFAULT = Smoothing()
"""The pages' default: EMA over a span of 5 logged points."""
