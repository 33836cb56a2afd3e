"""Learning-rate schedules as pure functions of the step."""

from __future__ import annotations

import math


def lr_at(step: int, base_lr: float, warmup: int, total: int, kind: str = "constant",
          floor: float = 0.1) -> float:
    """LR for 0-based ``step``: linear warm-up over ``warmup`` steps, then constant or cosine to
    ``floor * base_lr`` at ``total``."""
    if warmup > 0 and step < warmup:
        return base_lr * (step + 1) / warmup
    if kind == "constant":
        return base_lr
    frac = min(1.0, (step - warmup) / max(1, total - warmup))
    return base_lr * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * frac)))
