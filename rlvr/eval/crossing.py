"""Where two mean pass@k curves cross, in doublings of k, with a bootstrap interval over problems.

Yue et al. 2025 read the k at which the base's pass@k curve meets the RL model's from above: RL
leads at small k, the base at large k. :func:`crossover_k` (:mod:`rlvr.eval.support`) gives the
smallest evaluated k where one curve is above the other beyond the interval, a point without an
interval. Here the crossing itself is the estimate:

    d(k) = mean_p [pass@k(model)_p - pass@k(against)_p]            (the seed's two mean curves)
    j    = the first evaluated k with d(k_j) > 0
    log2 k* = log2 k_{j-1} + d_{j-1} / (d_{j-1} - d_j) * (log2 k_j - log2 k_{j-1})   (linear in log2 k)

k* = k_0 when ``model`` is already above at the smallest k; with no k where d > 0 the crossing lies
beyond the sampled range, and is censored at one doubling past it (log2 k* = log2 k_max + 1). The
reported quantity is ``log2 k_max - log2 k*``, the doublings of k by which the crossing lies inside the
sampled range: > 0 means ``model`` overtakes ``against`` before k_max; -1 means it does not up to k_max
(a censored value: only its sign is read). The interval: the same quantity on 1000 resamples of the
problems (each resample's two curves paired problem by problem), 2.5% and 97.5% percentiles.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rlvr.errors import UserError
from rlvr.eval.passk import resampled_means

CENSOR_DOUBLINGS = 1.0
"""Where a curve pair that never crosses up to k_max is placed: this many doublings beyond k_max."""


def crossing_log2k(ks: Sequence[int], diff_D_K: np.ndarray) -> np.ndarray:
    """log2 of the crossing k of each row of mean differences (see the module docstring).

    ``ks``: (K,) evaluated k, increasing. ``diff_D_K``: (D, K) mean_p pass@k(model) - pass@k(against)
    of D curve pairs (the observed one, or bootstrap resamples). -> (D,) log2 k*, censored at
    log2 k_max + :data:`CENSOR_DOUBLINGS` where a row is never above 0."""
    log_k = np.log2(np.asarray(ks, dtype=np.float64))  # (K,)
    diff = np.atleast_2d(np.asarray(diff_D_K, dtype=np.float64))  # (D, K)
    if log_k.ndim != 1 or diff.shape[1] != log_k.size or np.any(np.diff(log_k) <= 0):
        raise UserError(f"crossing needs increasing ks (K,) and differences (D, K), got {log_k.size} ks and "
                        f"{diff.shape}")
    above = diff > 0  # (D, K)
    first = above.argmax(axis=1)  # (D,) the first k above 0 (0 where none is)
    prev = np.maximum(first - 1, 0)
    rows = np.arange(diff.shape[0])
    d_prev, d_first = diff[rows, prev], diff[rows, first]  # d_prev <= 0 < d_first where first > 0
    share = np.where(first > 0, d_prev / np.where(first > 0, d_prev - d_first, -1.0), 0.0)
    at = log_k[prev] + share * (log_k[first] - log_k[prev])
    return np.where(above.any(axis=1), at, log_k[-1] + CENSOR_DOUBLINGS)


def crossing_doublings(ks: Sequence[int], model_P_K: np.ndarray, against_P_K: np.ndarray, n_boot: int = 1000,
                       alpha: float = 0.05, seed: int = 0) -> tuple[float, float, float]:
    """(value, lo, hi): log2 k_max - log2 k* of the observed curves and its percentile interval over
    ``n_boot`` resamples of the problems (fixed ``seed``). ``model_P_K``, ``against_P_K``: (P, K)
    per-problem pass@k of the same problems at ``ks`` (increasing)."""
    model = np.asarray(model_P_K, dtype=np.float64)
    against = np.asarray(against_P_K, dtype=np.float64)
    if model.ndim != 2 or model.shape != against.shape or model.shape[0] == 0:
        raise UserError(f"crossing needs two (P, K) pass@k arrays of the same problems, got {model.shape} and "
                        f"{against.shape}")
    diff_P_K = model - against
    top = float(np.log2(ks[-1]))
    observed = top - crossing_log2k(ks, diff_P_K.mean(0, keepdims=True))[0]
    resampled = top - crossing_log2k(ks, resampled_means(diff_P_K, n_boot, seed))  # (n_boot,)
    lo, hi = np.quantile(resampled, [alpha / 2, 1 - alpha / 2])
    return float(observed), float(lo), float(hi)
