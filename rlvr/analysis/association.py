"""Does one measured quantity predict another across units (checkpoints x seeds)? Pearson and
Spearman correlation with a bootstrap interval over the units, for claims such as "the base
checkpoint's pass@k predicts RL's gain" or "the collapse step of an intrinsic-reward run predicts
supervised RL's gain from the same checkpoint" (docs/methods/unsupervised_rlvr.md).

Pure numpy: x, y are (N,) arrays of N units; ``groups`` (N,) optional labels (e.g. the checkpoint)
resampled as whole clusters, so that the seeds of one checkpoint do not count as independent.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rlvr.errors import UserError


@dataclass(frozen=True)
class Association:
    """r (Pearson) and rho (Spearman) over N units, each with a percentile bootstrap interval."""

    n: int
    r: float
    r_low: float
    r_high: float
    rho: float
    rho_low: float
    rho_high: float
    level: float


def _ranks(v: np.ndarray) -> np.ndarray:
    """Average ranks (ties share the mean rank), 0-based. v: (N,) -> (N,)."""
    order = np.argsort(v, kind="mergesort")
    ranks = np.empty(v.size)
    ranks[order] = np.arange(v.size, dtype=float)
    for value in np.unique(v):
        tie = v == value
        if tie.sum() > 1:
            ranks[tie] = ranks[tie].mean()
    return ranks


def pearson(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson correlation of (N,) arrays; NaN when either is constant or N < 3."""
    if x.size < 3:
        return float("nan")
    x, y = x - x.mean(), y - y.mean()
    den = float(np.sqrt((x * x).sum() * (y * y).sum()))
    return float((x * y).sum() / den) if den > 0 else float("nan")


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman rank correlation (Pearson of the average ranks)."""
    return pearson(_ranks(x), _ranks(y))


def associate(x, y, groups=None, *, n_boot: int = 2000, seed: int = 0, level: float = 0.95) -> Association:
    """Correlation of y with x over N units, with intervals from resampling units (or whole
    ``groups``) with replacement; replicates where either side is constant are skipped."""
    x, y = np.asarray(x, dtype=float).ravel(), np.asarray(y, dtype=float).ravel()
    if x.shape != y.shape:
        raise UserError(f"x has {x.size} values and y {y.size}; give one pair per unit")
    if x.size < 3 or not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise UserError("a correlation needs at least 3 units with finite values")
    labels = np.arange(x.size) if groups is None else np.asarray(groups)
    if labels.shape != x.shape:
        raise UserError("groups must give one label per unit")
    clusters = [np.flatnonzero(labels == g) for g in np.unique(labels)]
    rng = np.random.default_rng(seed)
    rs, rhos = [], []
    for _ in range(n_boot):
        idx = np.concatenate([clusters[i] for i in rng.integers(0, len(clusters), len(clusters))])
        r, rho = pearson(x[idx], y[idx]), spearman(x[idx], y[idx])
        if np.isfinite(r) and np.isfinite(rho):
            rs.append(r)
            rhos.append(rho)
    if not rs:
        raise UserError("every bootstrap replicate had a constant side; the data cannot give a correlation")
    q = [(1 - level) / 2 * 100, (1 + level) / 2 * 100]
    r_lo, r_hi = np.percentile(rs, q)
    rho_lo, rho_hi = np.percentile(rhos, q)
    return Association(int(x.size), pearson(x, y), float(r_lo), float(r_hi), spearman(x, y), float(rho_lo),
                       float(rho_hi), level)
