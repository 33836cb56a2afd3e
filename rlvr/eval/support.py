"""Support of a base and a trained model (Invisible Leash, 2507.14843) and related counts.

A problem is *supported* by a model when at least one of its samples is correct.
With base q and trained pi, per problem: preserved P (both), shrunk S (base only),
expanded E (trained only), out_of_support O (neither). Rates over problem counts:
SRR = P/(P+S), NDR = E/(P+E), SDS = 2*SRR*NDR/(SRR+NDR), NSCR = (E-S)/(P+E+S).
A rate whose denominator is zero is ``None`` (JSON null), and so is SDS when SRR
or NDR is None.
Both models are compared at the same n per problem: the first min(n_base, n_trained)
samples of each (in file order), or fewer when ``k`` is given.
The crossover k is the smallest k at which base pass@k is above trained pass@k beyond the
95% paired bootstrap interval of their difference (:func:`crossover_k`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from rlvr.errors import UserError
from rlvr.eval.passk import pass_at_k_difference_ci
from rlvr.eval.samples import normalise_whitespace

CATEGORIES = ("preserved", "shrunk", "expanded", "out_of_support")
HISTOGRAM_BINS = ("0",) + tuple(f"({i / 10:g},{(i + 1) / 10:g}]" for i in range(9)) + ("(0.9,1)", "1")


def classify(base_supported: bool, trained_supported: bool) -> str:
    """One of CATEGORIES for a problem."""
    if base_supported:
        return "preserved" if trained_supported else "shrunk"
    return "expanded" if trained_supported else "out_of_support"


def support_categories(
    base_correct: Mapping[str, Sequence[bool]],
    trained_correct: Mapping[str, Sequence[bool]],
    k: int | None = None,
) -> dict[str, str]:
    """problem_id -> category for the problems present in both mappings (base order)."""
    def first(flags: Sequence[bool]) -> tuple[int, int | None]:
        return len(flags), next((i for i, ok in enumerate(flags) if ok), None)

    return support_categories_of_counts({p: first(f) for p, f in base_correct.items()},
                                        {p: first(f) for p, f in trained_correct.items()}, k)


def support_categories_of_counts(
    base: Mapping[str, tuple[int, int | None]],
    trained: Mapping[str, tuple[int, int | None]],
    k: int | None = None,
) -> dict[str, str]:
    """:func:`support_categories` from (samples, file-order index of the first correct one or None)
    per problem: among the first m samples some is correct when that index is below m."""
    if k is not None and k < 1:
        raise UserError(f"support needs k >= 1 samples per problem, got k={k}; pass a positive k")
    out: dict[str, str] = {}
    for pid, (n_base, first_base) in base.items():
        if pid not in trained:
            continue
        n_trained, first_trained = trained[pid]
        m = min(n_base, n_trained, k if k is not None else n_base)
        out[pid] = classify(first_base is not None and first_base < m, first_trained is not None and first_trained < m)
    return out


def support_counts(categories: Mapping[str, str]) -> dict[str, int]:
    """Category -> number of problems (all four keys present)."""
    counts = dict.fromkeys(CATEGORIES, 0)
    for cat in categories.values():
        counts[cat] += 1
    return counts


def _ratio(num: float, den: float) -> float | None:
    return num / den if den else None


def support_rates(counts: Mapping[str, int]) -> dict[str, float | None]:
    """SRR, NDR, SDS, NSCR from category counts; None where a denominator is zero."""
    p, s, e = counts["preserved"], counts["shrunk"], counts["expanded"]
    srr, ndr = _ratio(p, p + s), _ratio(e, p + e)
    sds = None if srr is None or ndr is None else _ratio(2 * srr * ndr, srr + ndr)
    return {"SRR": srr, "NDR": ndr, "SDS": sds, "NSCR": _ratio(e - s, p + e + s)}


def distinct_correct(texts: Sequence[str | None], correct: Sequence[bool]) -> int:
    """Number of distinct (whitespace-normalised) texts among the correct samples; None texts skipped."""
    return len({normalise_whitespace(t) for t, ok in zip(texts, correct) if ok and t is not None})


CROSSOVER_LABEL = "crossover k (base above trained beyond the 95% interval)"


def crossover_k(
    ks: Sequence[int],
    base_P_K: Sequence[Sequence[float]] | np.ndarray,
    trained_P_K: Sequence[Sequence[float]] | np.ndarray,
    *,
    n_boot: int = 1000,
    alpha: float = 0.05,
    seed: int = 0,
) -> int | None:
    """Smallest k at which the base model's pass@k is above the trained model's beyond the interval.

    ``ks``: (K,) evaluated k (any order). ``base_P_K``, ``trained_P_K``: (P, K) per-problem
    pass@k of the same P problems (row p of both is problem p), column j for ``ks[j]``.

    Definition: with d_p(k) = base_pass@k(p) - trained_pass@k(p) and [lo(k), hi(k)] the
    ``1 - alpha`` (95%) paired percentile bootstrap interval of mean_p d_p(k) over problems
    (:func:`rlvr.eval.passk.pass_at_k_difference_ci`, ``n_boot`` draws, fixed ``seed``),
    the crossover is min{k in ks : lo(k) > 0}. A difference whose interval includes 0 (a
    tie within the noise, e.g. 0.905 vs 0.895 over a few hundred problems) does not count.
    None when no evaluated k qualifies ("none up to k_max", :func:`crossover_text`).
    There is no "trained led first" condition: when base is already above at the smallest k,
    that k is returned. Pure and deterministic.
    """
    ks_arr = np.asarray(ks, dtype=np.int64).reshape(-1)
    base = np.asarray(base_P_K, dtype=np.float64)
    trained = np.asarray(trained_P_K, dtype=np.float64)
    if ks_arr.size == 0 or base.ndim != 2 or base.shape != trained.shape or base.shape[1] != ks_arr.size:
        raise UserError(
            f"crossover needs ks (K,) and per-problem base and trained pass@k (P, K) of the same problems, "
            f"got {ks_arr.size} ks, {base.shape} and {trained.shape}; pass pass_at_k_matrix outputs"
        )
    if not (np.isfinite(base).all() and np.isfinite(trained).all()):
        raise UserError("crossover got a NaN or infinite pass@k; evaluate only k <= every problem's n")
    lo, _ = pass_at_k_difference_ci(base, trained, n_boot=n_boot, alpha=alpha, seed=seed)
    order = np.argsort(ks_arr, kind="stable")
    return next((int(ks_arr[j]) for j in order if lo[j] > 0), None)


def crossover_text(k: int | None, k_max: int) -> str:
    """``"k=4"``, or ``"none up to k=16"`` when there is no crossover up to ``k_max``."""
    return f"k={k}" if k is not None else f"none up to k={k_max}"


def accuracy_bin(n: int, c: int) -> str:
    """Label of the bin of accuracy c/n: 0, (0,0.1], ..., (0.8,0.9], (0.9,1), 1 (exact integer maths)."""
    if n < 1 or not 0 <= c <= n:
        raise UserError(f"accuracy needs 0 <= c <= n and n >= 1, got n={n}, c={c}; fix the sample counts")
    if c == 0:
        return "0"
    if c == n:
        return "1"
    return HISTOGRAM_BINS[-(-10 * c // n)]  # ceil(10 c / n) in 1..10


def accuracy_histogram(n_per_problem: Sequence[int], c_per_problem: Sequence[int]) -> dict[str, int]:
    """Number of problems per accuracy bin (all 12 bins, in order)."""
    hist = dict.fromkeys(HISTOGRAM_BINS, 0)
    for n, c in zip(n_per_problem, c_per_problem):
        hist[accuracy_bin(int(n), int(c))] += 1
    return hist
