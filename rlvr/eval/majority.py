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
on their sum being k (any p in (0, 1)), so

    P(x_c = x, all others <= x, R others tie) = [t^k] prod_j B_j(t) / Binomial(k; n, p),

with B_c = Bin(x; m_c, p) t^x, each other class truncated at x (its t^x term marked by s to count
ties), the unparsable samples and the classes smaller than x one free Binomial pool. The 1/T share
is E[1/(1 + R)] = int_0^1 s^R ds, integrated exactly by Gauss-Legendre quadrature in s (the
polynomial in s has degree <= R_max). Every term is a probability (no binomial coefficient is
formed), so n in the thousands is safe. Cost: O(x_max * classes * k^2) per problem in the worst case.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from rlvr.errors import UserError

NEGLIGIBLE = 1e-17
"""A vote count x of a correct class whose probability is below this share of P(sum = k) is
skipped: its term is at most that (maj@k is exact to about 1e-15 with it, checked by brute force)."""


def _log_binom_pmf(a: np.ndarray, m: int, log_p: float, log_q: float, log_fact: np.ndarray) -> np.ndarray:
    """log Binomial(a; m, p) for the integer array a (0 <= a <= m)."""
    return log_fact[m] - log_fact[a] - log_fact[m - a] + a * log_p + (m - a) * log_q


def _pmf(m: int, upto: int, log_p: float, log_q: float, log_fact: np.ndarray) -> np.ndarray:
    """(upto+1,) Binomial(a; m, p) for a = 0..upto (0 beyond m)."""
    out = np.zeros(upto + 1)
    a = np.arange(min(m, upto) + 1)
    out[: a.size] = np.exp(_log_binom_pmf(a, m, log_p, log_q, log_fact))
    return out


@functools.lru_cache(maxsize=64)
def _gauss_legendre_01(count: int) -> tuple[np.ndarray, np.ndarray]:
    """(count,) Gauss-Legendre nodes and weights on [0, 1] (read-only: computed once per count, the
    eigenvalue problem behind them being a third of maj@k's time when made per vote count)."""
    nodes, weights = np.polynomial.legendre.leggauss(count)
    s, w = (nodes + 1) / 2, weights / 2
    s.flags.writeable = w.flags.writeable = False
    return s, w


def _at_roots(coef: np.ndarray, size: int) -> np.ndarray:
    """(size,) the polynomial with coefficients ``coef`` at the roots exp(-2 pi i j / size): its
    coefficients folded modulo ``size`` (a degree >= size wraps round), then one FFT."""
    if coef.size > size:
        coef = np.bincount(np.arange(coef.size) % size, weights=coef, minlength=size)
    return np.fft.fft(coef, size)


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
    log_fact = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, n + 1)))])
    return np.array([_maj_one_k(sizes, [bool(c) for c in correct], int(unparsable), int(k), n, log_fact)
                     for k in ks])


def _maj_one_k(sizes: list[int], correct: list[bool], unparsable: int, k: int, n: int,
               log_fact: np.ndarray) -> float:
    if k == n:  # every sample votes: the tie-averaged vote of all of them
        if not sizes:
            return 0.0
        top = max(sizes)
        winners = [c for m, c in zip(sizes, correct) if m == top]
        return sum(winners) / len(winners)
    p = k / n
    log_p, log_q = float(np.log(p)), float(np.log1p(-p))
    norm = float(np.exp(_log_binom_pmf(np.array(k), n, log_p, log_q, log_fact)))  # P(sum of counts = k)
    pmfs = {m: _pmf(m, m, log_p, log_q, log_fact) for m in set(sizes)}
    total = 0.0
    for c in (j for j, ok in enumerate(correct) if ok):
        others = [m for j, m in enumerate(sizes) if j != c]
        counts = {m: others.count(m) for m in set(others)}
        votes_c = pmfs[sizes[c]]  # P(x_c = x) under the embedding
        for x in range(1, min(sizes[c], k) + 1):
            if votes_c[x] < NEGLIGIBLE * norm:  # its whole term is below 1e-17 of maj@k's scale
                continue
            rest = k - x
            bounded = {m: q for m, q in counts.items() if m >= x}  # can reach x: truncated, ties marked
            if any(float(pmfs[m][: x + 1].sum()) < NEGLIGIBLE * norm for m in bounded):
                continue  # some class almost surely passes x: c cannot win
            free = unparsable + sum(m * q for m, q in counts.items() if m < x)  # never reach x: one free pool
            r_max = min(sum(bounded.values()), rest // x)
            s, w = _gauss_legendre_01(r_max // 2 + 1)  # exact to degree 2*len-1
            # [t^rest] of free(t) * prod_m (P_m(t) + s T_m(t))^q_m, evaluated at N roots of unity: the
            # product has degree <= n, so N > max(rest, n - rest) aliases no other degree onto rest
            size = max(rest, n - rest) + 1
            roots = np.exp(-2j * np.pi * np.arange(size) / size)  # (N,)
            product = np.tile(_at_roots(_pmf(free, free, log_p, log_q, log_fact), size), (s.size, 1))  # (Q, N)
            for m, q in bounded.items():
                below = _at_roots(pmfs[m][:x], size)  # P_m: a < x votes
                tie = pmfs[m][x] * roots ** x  # T_m: exactly x votes, tied with c
                product *= (below[None, :] + s[:, None] * tie[None, :]) ** q
            share = float(w @ (product @ np.conj(roots ** rest)).real) / size  # E[1/(1+R); others <= x]
            total += float(votes_c[x]) * share
    return min(1.0, max(0.0, total / norm))
