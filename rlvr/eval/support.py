"""Support of a base and a trained model (Invisible Leash, 2507.14843) and related counts.

A problem is *supported* by a model when at least one of its samples is correct.
With base q and trained pi, per problem: preserved P (both), shrunk S (base only),
expanded E (trained only), out_of_support O (neither). Rates over problem counts:
SRR = P/(P+S), NDR = E/(P+E), SDS = 2*SRR*NDR/(SRR+NDR), NSCR = (E-S)/(P+E+S).
A rate whose denominator is zero is ``None`` (JSON null), and so is SDS when SRR
or NDR is None.
Both models are compared at the same n per problem: the first min(n_base, n_trained)
samples of each (in file order), or fewer when ``k`` is given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rlvr.errors import UserError
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
    if k is not None and k < 1:
        raise UserError(f"support needs k >= 1 samples per problem, got k={k}; pass a positive k")
    out: dict[str, str] = {}
    for pid, base in base_correct.items():
        if pid not in trained_correct:
            continue
        trained = trained_correct[pid]
        m = min(len(base), len(trained), k if k is not None else len(base))
        out[pid] = classify(any(base[:m]), any(trained[:m]))
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


def crossover_k(ks: Sequence[int], base_pass: Sequence[float], trained_pass: Sequence[float]) -> int | None:
    """Smallest k at which base pass@k >= trained pass@k, given trained led at the smallest k.

    None when trained did not lead at the smallest evaluated k (normally k = 1), or
    the base never catches up within ``ks``.
    """
    if not (len(ks) == len(base_pass) == len(trained_pass)) or not ks:
        raise UserError("crossover needs one base and one trained pass@k per k; pass equal-length curves")
    points = sorted(zip(ks, base_pass, trained_pass))
    if not points[0][2] > points[0][1]:
        return None
    return next((int(k) for k, b, t in points if b >= t), None)


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
