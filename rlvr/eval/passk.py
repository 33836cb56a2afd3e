"""Unbiased pass@k (Chen et al., 2107.03374) and bootstrap confidence intervals.

With n samples of a problem of which c are correct, the unbiased estimator is

    pass@k = 1 - C(n-c, k) / C(n, k),     1 <= k <= n,

which equals 1 when n - c < k. Shapes: K pass@k sample counts (the ``ks``),
P problems. Pure functions; the only I/O-free randomness is the seeded bootstrap.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rlvr.errors import UserError


def _check_counts(n: int, c: int) -> None:
    if n < 1 or c < 0 or c > n:
        raise UserError(f"pass@k needs 0 <= c <= n and n >= 1, got n={n}, c={c}; fix the sample counts")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one problem via the stable product of docs/methods/evaluation.md.

    1 - prod_{i=n-c+1}^{n} (1 - k/i); exactly 1.0 when n - c < k. Never forms a
    binomial coefficient, so it is safe for any n.
    """
    _check_counts(n, c)
    if not 1 <= k <= n:
        raise UserError(
            f"pass@k needs 1 <= k <= n, got k={k} with n={n}; ask for k <= n or draw more samples"
        )
    if n - c < k:
        return 1.0
    i = np.arange(n - c + 1, n + 1, dtype=np.float64)
    return float(-np.expm1(np.log1p(-k / i).sum()))


def pass_at_k_matrix(
    n_per_problem: Sequence[int] | np.ndarray,
    c_per_problem: Sequence[int] | np.ndarray,
    ks: Sequence[int] | np.ndarray,
    k_above_n: str = "error",
) -> np.ndarray:
    """Per-problem unbiased pass@k for every k in ``ks``: returns (P, K) float64.

    Vectorised over problems and k with the equivalent running product
    C(n-c, k) / C(n, k) = prod_{j=0}^{k-1} (1 - c / (n - j)), accumulated in log
    space (``log1p`` + ``cumsum``, then ``-expm1``): O(P * max(ks)) work, relative
    error ~ max(ks) * 1e-16, no overflow or underflow trouble at n = 4096 or beyond.
    Problems may have different n. A k larger than a problem's n is an error when
    ``k_above_n="error"`` (default); with ``k_above_n="nan"`` that entry is NaN.
    """
    if k_above_n not in ("error", "nan"):
        raise UserError(f"k_above_n must be 'error' or 'nan', got {k_above_n!r}; pick one of those")
    n = np.asarray(n_per_problem, dtype=np.int64).reshape(-1)
    c = np.asarray(c_per_problem, dtype=np.int64).reshape(-1)
    ks_arr = np.asarray(ks, dtype=np.int64).reshape(-1)
    if n.shape != c.shape:
        raise UserError(
            f"got {n.size} sample counts but {c.size} correct counts; pass one of each per problem"
        )
    if n.size == 0 or ks_arr.size == 0:
        raise UserError("pass@k needs at least one problem and one k; pass non-empty inputs")
    if (n < 1).any() or (c < 0).any() or (c > n).any():
        bad = int(np.flatnonzero((n < 1) | (c < 0) | (c > n))[0])
        _check_counts(int(n[bad]), int(c[bad]))
    if (ks_arr < 1).any():
        raise UserError(f"pass@k needs k >= 1, got ks={ks_arr.tolist()}; use positive k")
    above = ks_arr[None, :] > n[:, None]  # (P, K)
    if above.any() and k_above_n == "error":
        p, j = np.argwhere(above)[0]
        raise UserError(
            f"problem {p} has n={n[p]} samples but k={ks_arr[j]} was asked; use k <= the smallest n "
            "or k_above_n='nan'"
        )
    k_max = int(ks_arr.max())
    j = np.arange(k_max, dtype=np.float64)[None, :]  # (1, k_max)
    remaining = n[:, None].astype(np.float64) - j  # (P, k_max): n - j
    safe = np.where(remaining > 0, remaining, 1.0)
    # c / (n - j), capped at 1: the factor hits 0 at j = n - c and the ratio stays 0 (pass@k = 1)
    frac = np.minimum(np.where(remaining > 0, c[:, None] / safe, 0.0), 1.0)  # 0 past n: masked later
    with np.errstate(divide="ignore"):
        log_ratio = np.cumsum(np.log1p(-frac), axis=1)  # (P, k_max): log C(n-c,k)/C(n,k) at k = j+1
    out = -np.expm1(log_ratio[:, ks_arr - 1])  # (P, K)
    out = np.where(above, np.nan, out)
    return out


def mean_pass_at_k(
    n_per_problem: Sequence[int] | np.ndarray,
    c_per_problem: Sequence[int] | np.ndarray,
    ks: Sequence[int] | np.ndarray,
) -> np.ndarray:
    """pass@k averaged over problems: (K,). Every k must be <= every problem's n."""
    return pass_at_k_matrix(n_per_problem, c_per_problem, ks).mean(axis=0)


def default_ks(n: int) -> list[int]:
    """Powers of two up to n, plus n itself when it is not a power of two."""
    if n < 1:
        raise UserError(f"need at least one sample per problem, got n={n}; generate samples first")
    ks = [1 << e for e in range(n.bit_length()) if (1 << e) <= n]
    if ks[-1] != n:
        ks.append(n)
    return ks


def resampled_means(values_P_K: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    """(n_boot, K) column means of ``values_P_K`` (P, K) over ``n_boot`` resamples of its rows (problems,
    with replacement; every column with the same draws), drawn as multinomial counts (n_boot, P) from
    ``numpy.random.default_rng(seed)``: memory O(n_boot * (P + K)) whatever K is."""
    num = values_P_K.shape[0]
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, num, size=(n_boot, num))  # (n_boot, P)
    flat = (idx + num * np.arange(n_boot)[:, None]).ravel()
    counts = np.bincount(flat, minlength=n_boot * num).reshape(n_boot, num)  # (n_boot, P)
    return counts @ values_P_K / num


def bootstrap_ci(
    per_problem_values: Sequence[float] | np.ndarray,
    n_boot: int = 1000,
    alpha: float = 0.05,
    seed: int = 0,
) -> tuple[float, float] | tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap CI of the mean over problems (resampling problems).

    ``per_problem_values``: (P,) -> returns (lo, hi) floats; (P, K) -> returns two
    (K,) arrays, every column resampled with the same problem draws. Deterministic
    for a given ``seed``. Resamples are drawn as multinomial counts (n_boot, P), so
    memory is O(n_boot * (P + K)) whatever K is.
    """
    values = np.asarray(per_problem_values, dtype=np.float64)
    if values.ndim not in (1, 2) or values.shape[0] == 0:
        raise UserError(f"bootstrap needs a (P,) or (P, K) array with P >= 1, got shape {values.shape}")
    if not 0 < alpha < 1 or n_boot < 1:
        raise UserError(f"bootstrap needs 0 < alpha < 1 and n_boot >= 1, got alpha={alpha}, n_boot={n_boot}")
    means = resampled_means(values.reshape(values.shape[0], -1), n_boot, seed)  # (n_boot, K)
    lo, hi = np.quantile(means, [alpha / 2, 1 - alpha / 2], axis=0)  # (K,) each
    if values.ndim == 1:
        return float(lo[0]), float(hi[0])
    return lo, hi


def pass_at_k_difference_ci(
    base_P_K: Sequence[Sequence[float]] | np.ndarray,
    trained_P_K: Sequence[Sequence[float]] | np.ndarray,
    n_boot: int = 1000,
    alpha: float = 0.05,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Paired percentile bootstrap CI of mean_p(base_pass@k - trained_pass@k), one per k.

    ``base_P_K``, ``trained_P_K``: (P, K) per-problem pass@k of the SAME P problems, in the
    same row order (row p of both is problem p). Problems are resampled with replacement and
    both models keep their problem's pair, so the interval is that of the difference (not two
    separate intervals); every k uses the same draws. Returns ``(lo, hi)``, two (K,) arrays.
    Deterministic for a given ``seed`` (see :func:`bootstrap_ci`).
    """
    base = np.asarray(base_P_K, dtype=np.float64)
    trained = np.asarray(trained_P_K, dtype=np.float64)
    if base.ndim != 2 or base.shape != trained.shape or base.shape[0] == 0:
        raise UserError(
            f"a paired pass@k difference needs two (P, K) arrays of the same shape with P >= 1, got "
            f"{base.shape} and {trained.shape}; pass per-problem pass@k of the same problems"
        )
    lo, hi = bootstrap_ci(base - trained, n_boot=n_boot, alpha=alpha, seed=seed)
    return np.asarray(lo), np.asarray(hi)
