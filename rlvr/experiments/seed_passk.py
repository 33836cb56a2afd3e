"""pass@k over several seeds' samples of the same problems, with the seed-level interval the verdicts
use (:func:`rlvr.experiments.verdict.seed_interval`): what ``rlvr eval --samples A B C`` and
``rlvr compare`` report (docs/commands/eval.md, "Several seeds").

One model: each seed's samples give per-problem unbiased pass@k, (P, K); its value is the mean over
problems and its 95% interval the percentile bootstrap over problems (as ``rlvr eval`` gives for one
file). Two models: each seed pair gives the per-problem difference other - reference, (P, K), its mean
and paired bootstrap interval (as the experiments' ``passk_diff`` measure). Over seeds, the seed-level
estimate is the mean of the seeds' values with the interval mean +- sqrt((t s / sqrt S)^2 + h^2)
(t: Student quantile, S - 1 degrees of freedom; s: sd of the seeds' values; h: mean per-seed
half-width). Every seed must hold the same problems.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from rlvr.errors import UserError
from rlvr.eval.passk import bootstrap_ci, pass_at_k_matrix
from rlvr.eval.samples import is_correct
from rlvr.eval.summary import check_ks
from rlvr.experiments.verdict import Estimate, seed_interval

Counts = dict[str, tuple[int, int]]
"""problem_id -> (n samples, c correct)."""


def problem_counts(rows: Iterable[Mapping[str, Any]]) -> Counts:
    """Per problem of one seed's sample rows (read once: a stream will do), (n, c), problems in order
    of first appearance."""
    tallies: dict[str, list[int]] = {}
    for row in rows:
        n_c = tallies.setdefault(row["problem_id"], [0, 0])
        n_c[0] += 1
        n_c[1] += is_correct(row)
    return {pid: (n, c) for pid, (n, c) in tallies.items()}


def check_same_problems(counts: Sequence[Counts], names: Sequence[str]) -> list[str]:
    """The problem ids every seed shares, in the first seed's order; UserError naming the first file
    whose problems differ (the seeds must be samples of the same problems)."""
    ids = list(counts[0])
    for c, name in zip(counts[1:], names[1:]):
        if set(c) != set(ids):
            only_here, missing = len(set(c) - set(ids)), len(set(ids) - set(c))
            raise UserError(f"{name} holds other problems than {names[0]} ({only_here} only in it, {missing} "
                            "missing from it); several seeds' files must sample the same problems")
    return ids


def _ks(counts: Sequence[Counts], ids: Sequence[str], ks: Sequence[int] | None) -> list[int]:
    return check_ks(ks, min(c[p][0] for c in counts for p in ids), "of any problem in any seed", fix="")


def passk_P_K(counts: Counts, ids: Sequence[str], ks: Sequence[int]) -> np.ndarray:
    """(P, K) per-problem unbiased pass@k of one seed, problems in ``ids`` order."""
    return pass_at_k_matrix([counts[p][0] for p in ids], [counts[p][1] for p in ids], ks)


def _block(per_seed_P_K: Sequence[np.ndarray], ks: Sequence[int], seed: int) -> dict[str, Any]:
    """Per k: the seed-level mean and interval, and each seed's value with its bootstrap interval."""
    bounds = [bootstrap_ci(m, seed=seed) for m in per_seed_P_K]  # per seed, two (K,) arrays
    out = {}
    for j, k in enumerate(ks):
        estimates = [Estimate(i, float(m[:, j].mean()), float(lo[j]), float(hi[j]))
                     for i, (m, (lo, hi)) in enumerate(zip(per_seed_P_K, bounds))]
        level = seed_interval(estimates)
        out[str(k)] = {"mean": level.value, "ci": [level.lo, level.hi],
                       "per_seed": [{"value": e.value, "ci": [e.lo, e.hi]} for e in estimates]}
    return out


def seed_passk(per_seed_rows: Sequence[Iterable[Mapping[str, Any]]], names: Sequence[str],
               ks: Sequence[int] | None = None, seed: int = 0) -> dict[str, Any]:
    """pass@k of one model from S seeds' sample rows (``names``: their files, for messages):
    {"seeds", "problems", "n", "pass_at_k": {k: {"mean", "ci", "per_seed": [{"value", "ci"}]}}}."""
    counts = [problem_counts(rows) for rows in per_seed_rows]
    ids = check_same_problems(counts, names)
    ks = _ks(counts, ids, ks)
    return {"seeds": list(names), "problems": len(ids), "n": min(c[p][0] for c in counts for p in ids),
            "pass_at_k": _block([passk_P_K(c, ids, ks) for c in counts], ks, seed)}


def seed_passk_difference(reference_rows: Sequence[Iterable[Mapping[str, Any]]],
                          other_rows: Sequence[Iterable[Mapping[str, Any]]], reference_names: Sequence[str],
                          other_names: Sequence[str], ks: Sequence[int] | None = None,
                          seed: int = 0) -> dict[str, Any]:
    """pass@k of ``other`` minus ``reference``, paired problem by problem within each seed pair: the
    i-th files of both, or one reference file (a model sampled once, e.g. the base) against every
    seed of ``other``. {"pairing", "problems", "n", "reference", "other" (each :func:`seed_passk`'s
    block), "difference": {k: {"mean", "ci", "per_seed"}}}."""
    if len(reference_rows) not in (1, len(other_rows)):
        raise UserError(f"{len(other_rows)} seeds' files against {len(reference_rows)} reference files: give as "
                        "many reference files (paired in order) or one (shared by every seed)")
    ref_counts = [problem_counts(rows) for rows in reference_rows]
    other_counts = [problem_counts(rows) for rows in other_rows]
    ids = check_same_problems([*ref_counts, *other_counts], [*reference_names, *other_names])
    ks = _ks([*ref_counts, *other_counts], ids, ks)
    ref_P_K = [passk_P_K(c, ids, ks) for c in ref_counts]
    other_P_K = [passk_P_K(c, ids, ks) for c in other_counts]
    diffs = [m - ref_P_K[i if len(ref_P_K) > 1 else 0] for i, m in enumerate(other_P_K)]
    pairing = "in order, file i with file i" if len(ref_P_K) > 1 else "one reference file shared by every seed"
    return {"pairing": pairing, "problems": len(ids), "n": min(c[p][0] for c in [*ref_counts, *other_counts]
                                                               for p in ids),
            "reference": _block(ref_P_K, ks, seed), "other": _block(other_P_K, ks, seed),
            "difference": _block(diffs, ks, seed)}


def seed_level_of_pairs(per_pair: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The seed-level pass@k difference of ``rlvr compare``'s seed-paired runs: per k, the mean of the
    pairs' differences and :func:`seed_interval` of them with their paired intervals
    (:func:`rlvr.report.differences.paired_differences`' ``per_pair`` blocks)."""
    ks = [k for k in per_pair[0]["pass_at_k_difference"] if all(k in p["pass_at_k_difference"] for p in per_pair)]
    out = {}
    for k in ks:
        estimates = [Estimate(i, float(p["pass_at_k_difference"][k]), float(p["ci"][k][0]), float(p["ci"][k][1]))
                     for i, p in enumerate(per_pair)]
        level = seed_interval(estimates)
        out[k] = {"mean": level.value, "ci": [level.lo, level.hi],
                  "per_seed": [{"value": e.value, "ci": [e.lo, e.hi]} for e in estimates]}
    return out
