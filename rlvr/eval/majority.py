"""Unbiased maj@k: the expected accuracy of a majority vote over k of a problem's n samples.

A problem's n samples fall into answer classes (answers pooled by the task's equivalence) of sizes
m_1..m_J, plus u samples with no parsable answer, which do not vote. maj@k is the mean, over all
C(n, k) subsets S of k samples (drawn without replacement), of

    score(S) = (number of correct classes among the T classes tied for the most votes in S) / T,

i.e. the majority vote of S with ties broken uniformly at random; 0 when no sample of S parses.
This is the estimator the bootstrap-over-subsets approximation (draw k of the n samples, vote,
repeat) converges to, computed exactly. At k = n it is the vote over all samples, ties averaged.
Formula and derivation: docs/methods/evaluation.md (maj@k).

Computation, for each correct class c and each vote count x >= 1 it can get: the others must get
at most x votes each, and a class tied at x shares the win. With the class counts of S
multivariate-hypergeometric, their law is that of independent Binomial(m_j, p) counts conditioned
on their sum being k (p = k / n), so

    P(x_c = x, all others <= x, R others tie) = [t^k] prod_j B_j(t) / Binomial(k; n, p),

with B_c = Bin(x; m_c, p) t^x, each other class truncated at x (its t^x term marked by s to count
ties), the unparsable samples one free Binomial pool. The 1/T share is E[1/(1+R)] = int_0^1 s^R ds,
integrated exactly by Gauss-Legendre quadrature in s (the polynomial in s has degree <= R_max).
Every term is a probability (no binomial coefficient is formed), so n in the thousands is safe.

What keeps it fast without changing its value beyond float rounding (:data:`TAIL`):

- each binomial is kept on its window, outside which its tails below and above each hold at most
  ``TAIL`` of P(sum = k) (:func:`_binomial`); x runs over c's window only;
- an x is skipped where Bin(x; m_c, p) * P(every other class <= x), which bounds its term, is below
  that share (c cannot win there);
- where Bin(x; m_c, p) * P(some other class >= x), which bounds what the others' truncation and ties
  change, is below it (c surely leads), the others' sum is one binomial, Binomial(k - x; n - m_c, p),
  in closed form;
- the remaining x (classes close enough to tie) are done together: each other class's factor,
  truncated at every x (and its t^x term times every quadrature node s), is one real row; all rows
  go through one real FFT of length N, the least 2^a 3^b 5^c at least the window of
  Binomial(n - m_c, p), are multiplied, and one inverse FFT gives the coefficient of t^(k - x); N
  covers that window, so only weight beyond the tails aliases;
- an answer-count profile (class sizes with their correctness, unparsable count, ks) is computed once
  (:func:`_profile_maj_at_k` is cached): problems that share one cost one; each class's binomial at
  (m, k, n) likewise (:func:`_class_law`), shared across problems and with the others' pools;
- exact cases come first: no correct class gives 0 at every k, every class correct with every sample
  parsed gives 1, k = 1 the share of samples in correct classes, k = n the vote of all;
- where the vote-count vectors (x_1..x_J, x_u) summing to k number at most :data:`ENUMERATED` (small
  k, few classes), maj@k is their exact sum (:func:`_enumerated_maj`), each term's log C(m, x) a sum
  of k small logs (within about 1e-14 of exact at n = 1024, where the DFT path is within 5e-12).

Every dropped term is below ``TAIL`` of the scale, so the value moves by under n * TAIL = 1e-17. The
binomial terms come from log-factorials (near 6,000 at n = 1024, an ulp of 9e-13), so each carries a
relative rounding of about 1e-12: maj@k is within about 5e-12 of its exact value at n = 1024, and
within 2e-12 of the value the whole-range computation of 3640ffe gave (checked on random profiles at
n = 1024); to 1e-12 of brute-force enumeration and of exact sums over vote counts
(tests/unit/test_majority.py).
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from rlvr.errors import UserError

TAIL = 1e-20
"""Each binomial's left and right tails beyond its window hold at most this share of P(sum = k), and
every term dropped is below it: maj@k moves by under n * TAIL."""


class Binomial(NamedTuple):
    """One class's vote count under the embedding (:func:`_binomial`)."""

    lo: int
    window: np.ndarray  # (hi - lo + 1,) pmf[lo..hi]
    at_most: np.ndarray  # (m + 1,) P(a <= x)
    at_least: np.ndarray  # (m + 1,) P(a >= x)


ENUMERATED = 5000
"""Up to this many vote-count vectors (x_1..x_J, x_u) summing to k, maj@k is their exact sum
(:func:`_enumerated_maj`) rather than the windowed DFT: small k, where the DFT's per-call work costs more."""

_LAWS_CACHED = 4096
"""Class laws kept (:func:`_class_law`): at n = 1024 about 25 KiB each at most, 100 MiB in all."""

_BATCH = 1 << 21
"""Entries of one product array (quadrature nodes x vote counts x FFT length): 16 to 32 MiB."""


def maj_at_k(sizes: Sequence[int], correct: Sequence[bool], unparsable: int, ks: Sequence[int]) -> np.ndarray:
    """(K,) unbiased maj@k of one problem for each k in ``ks`` (see the module docstring).

    sizes: (J,) samples per answer class (each >= 1); correct: (J,) whether the class is a correct
    answer; unparsable: samples with no answer. n = sum(sizes) + unparsable; every k in 1..n."""
    sizes = [int(m) for m in sizes]
    if len(sizes) != len(correct) or any(m < 1 for m in sizes) or unparsable < 0:
        raise UserError(f"maj@k needs one correctness flag per answer class and sizes >= 1, got sizes {sizes}, "
                        f"{len(correct)} flags, {unparsable} unparsable")
    n = sum(sizes) + int(unparsable)
    if any(not 1 <= k <= n for k in ks):
        raise UserError(f"maj@k needs 1 <= k <= n = {n}, got ks {list(ks)}; ask for k <= n")
    if not any(correct):  # no vote can pick a correct answer
        return np.zeros(len(ks))
    if all(correct) and not unparsable:  # every vote picks a correct answer
        return np.ones(len(ks))
    profile = tuple(sorted(zip(sizes, (bool(c) for c in correct))))
    return np.array(_profile_maj_at_k(profile, int(unparsable), tuple(int(k) for k in ks)))


@functools.lru_cache(maxsize=4096)
def _profile_maj_at_k(profile: tuple[tuple[int, bool], ...], unparsable: int, ks: tuple[int, ...]) -> tuple:
    """maj@k for each k of one answer-count profile ((size, correct) per class, sorted)."""
    sizes = [m for m, _ in profile]
    correct = [ok for _, ok in profile]
    n = sum(sizes) + unparsable
    return tuple(_maj_one_k(sizes, correct, unparsable, k, n) for k in ks)


@functools.lru_cache(maxsize=16)
def _log_factorials(n: int) -> np.ndarray:
    """(n + 1,) log a! for a = 0..n (read-only: computed once per n)."""
    log_fact = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, n + 1)))])
    log_fact.flags.writeable = False
    return log_fact


def _log_binom_pmf(a: np.ndarray, m: int, log_p: float, log_q: float, log_fact: np.ndarray) -> np.ndarray:
    """log Binomial(a; m, p) for the integer array a (0 <= a <= m)."""
    return log_fact[m] - log_fact[a] - log_fact[m - a] + a * log_p + (m - a) * log_q


def _binomial(m: int, log_p: float, log_q: float, log_fact: np.ndarray, cut: float) -> Binomial:
    """Binomial(m, p): its window (lo, pmf[lo..hi], the shortest run of a whose tails below lo and above
    hi each sum to at most ``cut``), P(a <= x) and P(a >= x) for x = 0..m."""
    pmf = np.exp(_log_binom_pmf(np.arange(m + 1), m, log_p, log_q, log_fact))
    at_most = np.cumsum(pmf)
    at_least = np.cumsum(pmf[::-1])[::-1]
    lo = int(np.searchsorted(at_most, cut, side="right"))  # at_most[lo - 1] <= cut: a < lo dropped
    above = np.nonzero(at_least > cut)[0]
    hi = int(above[-1]) if above.size else m
    lo = min(lo, hi)
    return Binomial(lo, pmf[lo: hi + 1], at_most, at_least)


@functools.lru_cache(maxsize=256)
def _embedding(k: int, n: int) -> tuple[float, float, float]:
    """log p, log(1 - p) and P(sum of counts = k) = Binomial(k; n, p) of the embedding, p = k / n."""
    p = k / n
    log_p, log_q = float(np.log(p)), float(np.log1p(-p))
    norm = float(np.exp(_log_binom_pmf(np.array(k), n, log_p, log_q, _log_factorials(n))))
    return log_p, log_q, norm


@functools.lru_cache(maxsize=_LAWS_CACHED)
def _class_law(m: int, k: int, n: int) -> Binomial:
    """:func:`_binomial` of a class of m samples at k of n (read-only arrays: computed once per
    (m, k, n), shared by every problem with a class or a pool of that size)."""
    log_p, log_q, norm = _embedding(k, n)
    law = _binomial(m, log_p, log_q, _log_factorials(n), TAIL * norm)
    for array in (law.window, law.at_most, law.at_least):
        array.flags.writeable = False
    return law


@functools.lru_cache(maxsize=64)
def _compositions(k: int, parts: int) -> np.ndarray:
    """(C, parts) every vector of non-negative counts summing to k, in lexicographic order (the order of
    stars and bars' bar positions; read-only). Built a column at a time: each row so far branches into
    every count 0..(what it leaves) of the next part, the last part taking the rest."""
    counts = np.zeros((1, parts), dtype=np.int64)
    left = np.array([k], dtype=np.int64)  # (rows,) what each row leaves for the parts after column j
    for j in range(parts - 1):
        width = left + 1
        row = np.repeat(np.arange(left.size), width)
        x = np.arange(int(width.sum())) - np.repeat(np.cumsum(width) - width, width)  # 0..left per row
        counts = counts[row]
        counts[:, j] = x
        left = left[row] - x
    counts[:, parts - 1] = left
    counts.flags.writeable = False
    return counts


@functools.lru_cache(maxsize=4096)
def _log_choose(m: int, k: int) -> np.ndarray:
    """(k + 1,) log C(m, x) for x = 0..k (-inf beyond m), as sums of log((m - i) / (i + 1)): terms of
    size log C only, so each is exact to a few ulps of it (no log-factorial near log n! is formed).
    Read-only: computed once per (m, k), shared by the problems with a class of m samples."""
    i = np.arange(min(m, k))
    logs = np.full(k + 1, -np.inf)
    logs[0] = 0.0
    logs[1: i.size + 1] = np.cumsum(np.log(m - i) - np.log(i + 1))
    logs.flags.writeable = False
    return logs


def _enumerated_maj(sizes: list[int], correct: list[bool], unparsable: int, k: int, n: int) -> float:
    """maj@k as the sum over every vote-count vector of its multivariate-hypergeometric probability
    prod_j C(m_j, x_j) C(u, x_u) / C(n, k) times its score (correct classes among the tied top / T)."""
    pools = sizes + ([unparsable] if unparsable else [])
    counts = _compositions(k, len(pools))  # (C, P) votes per class, then the unparsable samples
    log_weight = np.full(counts.shape[0], -_log_choose(n, k)[k])
    for j, m in enumerate(pools):
        log_weight += _log_choose(m, k)[counts[:, j]]
    votes = counts[:, :len(sizes)]  # (C, J)
    top = votes.max(axis=1)
    tied = votes == top[:, None]  # (C, J) the classes tied for the most votes
    share = (tied @ np.asarray(correct, dtype=float)) / tied.sum(axis=1)
    share[top == 0] = 0.0  # nothing parsable: no vote
    return min(1.0, max(0.0, float(np.exp(log_weight) @ share)))


@functools.lru_cache(maxsize=64)
def _gauss_legendre_01(count: int) -> tuple[np.ndarray, np.ndarray]:
    """(count,) Gauss-Legendre nodes and weights on [0, 1] (read-only: computed once per count)."""
    nodes, weights = np.polynomial.legendre.leggauss(count)
    s, w = (nodes + 1) / 2, weights / 2
    s.flags.writeable = w.flags.writeable = False
    return s, w


def _maj_one_k(sizes: list[int], correct: list[bool], unparsable: int, k: int, n: int) -> float:
    if k == n:  # every sample votes: the tie-averaged vote of all of them
        if not sizes:
            return 0.0
        top = max(sizes)
        winners = [c for m, c in zip(sizes, correct) if m == top]
        return sum(winners) / len(winners)
    if k == 1:  # one sample votes alone: the share of samples in correct classes
        return sum(m for m, ok in zip(sizes, correct) if ok) / n
    parts = len(sizes) + (unparsable > 0)
    if math.comb(k + parts - 1, parts - 1) <= ENUMERATED:
        return _enumerated_maj(sizes, correct, unparsable, k, n)
    log_fact = _log_factorials(n)
    log_p, log_q, norm = _embedding(k, n)
    cut = TAIL * norm
    laws = {m: _class_law(m, k, n) for m in set(sizes) | {unparsable}}
    total = 0.0
    for c in (j for j, ok in enumerate(correct) if ok):
        others = Counter(sizes[:c] + sizes[c + 1:])
        lo_c, votes_c = laws[sizes[c]].lo, laws[sizes[c]].window
        xs = np.arange(max(lo_c, 1), min(lo_c + votes_c.size - 1, k) + 1)  # (X,) c's votes beyond its tails
        votes = votes_c[xs - lo_c]
        # P(every other <= x) bounds c's share at x; P(some other >= x) bounds what the others' truncation
        # and ties take from the unconstrained Binomial(k - x; n - m_c, p): terms below cut are dropped
        stay_below = np.ones(xs.size)
        reach = np.zeros(xs.size)
        for m, q in others.items():
            stay_below *= laws[m].at_most[np.minimum(xs, m)] ** q
            reach += q * np.where(xs <= m, laws[m].at_least[np.minimum(xs, m)], 0.0)
        wins = votes * stay_below >= cut
        leads = wins & (votes * reach < cut)  # c surely leads: the others' sum is one binomial
        if leads.any():
            pool = n - sizes[c]
            rest = k - xs[leads]
            inside = rest <= pool
            closed = np.zeros(rest.size)
            closed[inside] = np.exp(_log_binom_pmf(rest[inside], pool, log_p, log_q, log_fact))
            total += float(votes[leads] @ closed)
        close = wins & ~leads
        if close.any():
            shares = _close_shares(xs[close], k, n, n - sizes[c], others, unparsable, laws)
            total += float(votes[close] @ shares)
    return min(1.0, max(0.0, total / norm))


def _close_shares(xs: np.ndarray, k: int, n: int, pool: int, others: Counter, unparsable: int,
                  laws: dict[int, Binomial]) -> np.ndarray:
    """(X,) for each vote count x of a correct class: E[1/(1+R); every other class <= x, the others'
    and the unparsable votes summing to k - x] (R: the others tied at x), by real FFTs of length N, the
    window of Binomial(pool, p), pool = n - m_c: each other class's factor for every quadrature node s and
    every x (its entries a < x, plus s times its entry a = x) is one real row, all transformed at once."""
    pool_law = _class_law(pool, k, n)
    lo_pool, span = pool_law.lo, pool_law.window.size
    size = _fft_length(span)  # N >= the window: only weight beyond the tails aliases
    lo_u, pmf_u = laws[unparsable].lo, laws[unparsable].window
    free = np.fft.rfft(_fold(pmf_u, size), size)  # (N // 2 + 1,)
    offset = lo_u + sum(laws[m].lo * q for m, q in others.items())
    rest = k - xs
    shares = np.zeros(xs.size)
    inside = (rest >= lo_pool) & (rest < lo_pool + span)  # elsewhere the joint weight is below the tails
    xs, idx = xs[inside], np.nonzero(inside)[0]
    if not xs.size:
        return shares
    r_max = int(min(sum(q for m, q in others.items() if m >= xs[0]), (k - xs[0]) // xs[0]))
    s, w = _gauss_legendre_01(r_max // 2 + 1)  # exact to degree 2*len-1
    chunk = max(1, _BATCH // (s.size * size))
    for start in range(0, xs.size, chunk):
        part = xs[start: start + chunk]  # (X,) vote counts, ascending
        product = np.broadcast_to(free, (s.size, part.size, free.size)).copy()  # (Q, X, N // 2 + 1)
        for m, q in others.items():
            lo, pmf = laws[m].lo, laws[m].window
            entry = np.arange(pmf.size)[None, :]  # (1, A) the window's entries, as degrees
            below = np.where(entry < (part - lo)[:, None], pmf, 0.0)  # (X, A): a < x
            tie = np.where(entry == (part - lo)[:, None], pmf, 0.0)  # (X, A): a = x
            rows = below[None] + s[:, None, None] * tie[None]  # (Q, X, A)
            factor = np.fft.rfft(_fold(rows, size), size)  # (Q, X, N // 2 + 1)
            product *= factor if q == 1 else factor ** q
        sums = np.fft.irfft(product, size)  # (Q, X, N): the shifted degrees' coefficients
        degree = (k - part - offset) % size  # where t^(k - x) sits among them
        shares[idx[start: start + chunk]] = w @ sums[:, np.arange(part.size), degree]
    return shares


@functools.lru_cache(maxsize=256)
def _fft_length(span: int) -> int:
    """The least 2^a 3^b 5^c >= span: an FFT length pocketfft does fast (a prime one goes by Bluestein)."""
    return min(two * three * five for two in _powers(2, span) for three in _powers(3, span)
               for five in _powers(5, span) if two * three * five >= span)


def _powers(base: int, span: int) -> list[int]:
    """base^0, base^1, ... up to the first power >= span."""
    powers = [1]
    while powers[-1] < span:
        powers.append(powers[-1] * base)
    return powers


def _fold(rows: np.ndarray, size: int) -> np.ndarray:
    """(..., min(A, size)) rows with degrees >= size added onto their residue mod size (circular)."""
    if rows.shape[-1] <= size:
        return rows
    padded = np.zeros(rows.shape[:-1] + (-(-rows.shape[-1] // size) * size,))
    padded[..., :rows.shape[-1]] = rows
    return padded.reshape(rows.shape[:-1] + (-1, size)).sum(axis=-2)
