"""Paired differences between two groups of runs (a reference A and another B): pass@k, support,
entropies and retention, each as B - A with a 95% paired bootstrap interval over problems.

Pairing: the runs of A and B that share a training seed are paired seed by seed (the seeds
neither shares are left out and named); groups of one run each are paired as they are; otherwise
every run of each group enters its group's mean. Within a pair, the runs' held-out samples
(``samples.jsonl``) are paired problem by problem: :func:`rlvr.eval.summary.compare` gives each
pair's block (its pass@k difference interval is the one ``eval.json`` uses for the crossover);
the pooled difference is the per-problem difference averaged over the pairs, its interval the
percentile bootstrap over problems (:func:`rlvr.eval.passk.bootstrap_ci`, seed 0, 1000 draws).
Runs without samples give the difference of their eval.json numbers, with no interval.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from rlvr.eval.entropy import answer_entropy_of
from rlvr.eval.passk import bootstrap_ci, default_ks, pass_at_k_matrix
from rlvr.eval.samples import group_by_problem, is_correct
from rlvr.eval.summary import compare
from rlvr.eval.support import CATEGORIES, support_rates
from rlvr.report.run_data import RunData, eval_block

Pair = tuple[RunData, RunData]


def pair_runs(reference: Sequence[RunData], other: Sequence[RunData]) -> tuple[list[Pair], str]:
    """(pairs, how they were paired, in words). Shared seeds pair seed by seed; one run each pair
    directly; otherwise every run of A with every run of B (their means compared, not paired)."""
    seeds_a = {r.seed: r for r in reference if r.seed is not None}
    seeds_b = {r.seed: r for r in other if r.seed is not None}
    shared = sorted(set(seeds_a) & set(seeds_b))
    if shared:
        left = sorted(set(seeds_a) ^ set(seeds_b))
        extra = f"; seeds {', '.join(map(str, left))} in one group only, left out" if left else ""
        return [(seeds_a[s], seeds_b[s]) for s in shared], f"by seed ({', '.join(map(str, shared))}){extra}"
    if len(reference) == 1 and len(other) == 1:
        return [(reference[0], other[0])], "run with run (one run each)"
    return ([(a, b) for a in reference for b in other],
            f"no shared seed: all {len(reference)} x {len(other)} run pairs averaged")


def _problem_values(rows: Sequence[Mapping], value: Callable[[list], float | None]) -> dict[str, float]:
    """problem_id -> value(its rows), problems where it is None left out."""
    out = {}
    for pid, group in group_by_problem(rows).items():
        v = value(group)
        if v is not None and math.isfinite(v):
            out[pid] = v
    return out


def _token_entropy(group: list) -> float | None:
    with_h = [(r["mean_entropy"], r["num_tokens"]) for r in group
              if r.get("mean_entropy") is not None and r.get("num_tokens")]
    total = sum(t for _, t in with_h)
    return sum(h * t for h, t in with_h) / total if total else None


def _answer_entropy(group: list) -> float | None:
    return answer_entropy_of([r.get("answer") for r in group]) if any("answer" in r for r in group) else None


def _solved(group: list) -> float:
    return float(any(is_correct(r) for r in group))


def _diff_row(metric: str, a_P: list[np.ndarray], b_P: list[np.ndarray]) -> dict[str, Any]:
    """Pooled row of a per-problem metric: each pair's (P,) values of A and B on the same problems."""
    a, b = np.mean(a_P, axis=0), np.mean(b_P, axis=0)  # (P,) mean over pairs
    lo, hi = bootstrap_ci(b - a, seed=0)
    return {"metric": metric, "reference": float(a.mean()), "other": float(b.mean()),
            "difference": float((b - a).mean()), "ci": [float(lo), float(hi)], "problems": int(a.size)}


def _per_problem(pairs_rows: Sequence[tuple[list, list]], value: Callable[[list], float | None],
                 ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per pair, (P,) values of A and B over the problems every pair has a value for."""
    a_maps = [_problem_values(a, value) for a, _ in pairs_rows]
    b_maps = [_problem_values(b, value) for _, b in pairs_rows]
    common = [p for p in a_maps[0] if all(p in m for m in a_maps + b_maps)]
    return ([np.array([m[p] for p in common]) for m in a_maps], [np.array([m[p] for p in common]) for m in b_maps])


def _passk_rows(pairs_rows: Sequence[tuple[list, list]], ks: Sequence[int]) -> list[dict[str, Any]]:
    a_K, b_K = [], []
    groups = [(group_by_problem(a), group_by_problem(b)) for a, b in pairs_rows]
    common = [p for p in groups[0][0] if all(p in ga and p in gb for ga, gb in groups)]
    for ga, gb in groups:
        for g, out in ((ga, a_K), (gb, b_K)):
            n = [len(g[p]) for p in common]
            out.append(pass_at_k_matrix(n, [sum(is_correct(r) for r in g[p]) for p in common], ks))  # (P, K)
    return [_diff_row(f"pass@{k}", [m[:, j] for m in a_K], [m[:, j] for m in b_K]) for j, k in enumerate(ks)]


def _support(pairs_rows: Sequence[tuple[list, list]], blocks: Sequence[Mapping]) -> dict[str, Any]:
    """Support of B against A (A in the place of the base), counts summed over the pairs, and the net
    change per problem (+1 expanded, -1 shrunk, 0 otherwise) with its paired interval."""
    counts = {c: sum(b["support"]["counts"][c] for b in blocks) for c in CATEGORIES}
    a_P, b_P = _per_problem(pairs_rows, _solved)
    net = _diff_row("solved at least once (support)", a_P, b_P) if a_P[0].size else None
    return {"counts": counts, "rates": support_rates(counts), "net": net}


def _retention_rows(pairs: Sequence[Pair]) -> list[dict[str, Any]]:
    """Greedy accuracy on each retention task both runs of every pair measured; paired per problem
    when eval.json kept the per-problem results (``correct``), else the difference of means."""
    def task_blocks(run: RunData) -> Mapping:
        return ((run.eval or {}).get("retention") or {}).get("trained") or {}

    tasks = [t for t in task_blocks(pairs[0][0]) if all(t in task_blocks(r) for pair in pairs for r in pair)]
    rows = []
    for task in tasks:
        blocks = [(task_blocks(a)[task], task_blocks(b)[task]) for a, b in pairs]
        if all("correct" in x and "correct" in y and len(x["correct"]) == len(y["correct"]) for x, y in blocks):
            rows.append(_diff_row(f"retention {task}", [np.asarray(x["correct"], float) for x, _ in blocks],
                                  [np.asarray(y["correct"], float) for _, y in blocks]))
        else:
            rows.append(_unpaired(f"retention {task}", [x.get("accuracy") for x, _ in blocks],
                                  [y.get("accuracy") for _, y in blocks]))
    return rows


def _unpaired(metric: str, a: Sequence[Any], b: Sequence[Any]) -> dict[str, Any]:
    """A row from summary numbers (no per-problem values): means over runs, no interval."""
    a_vals = [float(x) for x in a if isinstance(x, int | float)]
    b_vals = [float(x) for x in b if isinstance(x, int | float)]
    ma = sum(a_vals) / len(a_vals) if a_vals else None
    mb = sum(b_vals) / len(b_vals) if b_vals else None
    return {"metric": metric, "reference": ma, "other": mb,
            "difference": None if ma is None or mb is None else mb - ma, "ci": None, "problems": None}


def _from_eval_json(pairs: Sequence[Pair]) -> list[dict[str, Any]]:
    """pass@k and entropies from eval.json's trained blocks when the runs kept no samples."""
    blocks = [(eval_block(a.eval, "trained"), eval_block(b.eval, "trained")) for a, b in pairs]
    ks = sorted(set.intersection(*(set(x.get("pass_at_k") or {}) & set(y.get("pass_at_k") or {})
                                   for x, y in blocks)), key=int)
    rows = [_unpaired(f"pass@{k}", [x["pass_at_k"][k] for x, _ in blocks], [y["pass_at_k"][k] for _, y in blocks])
            for k in ks]
    for key in ("token_entropy", "answer_entropy"):
        rows.append(_unpaired(key.replace("_", " "), [x.get(key) for x, _ in blocks], [y.get(key) for _, y in blocks]))
    return rows


def _pair_block(a: RunData, b: RunData, block: Mapping) -> dict[str, Any]:
    """One pair's pass@k difference B - A and its paired interval, from its compare() block (A as base)."""
    base, trained = block["base"]["pass_at_k"], block["trained"]["pass_at_k"]
    return {"pair": [a.name, b.name], "pass_at_k_difference": {k: trained[k] - base[k] for k in base},
            "ci": {k: [-hi, -lo] for k, (lo, hi) in block["crossover"]["base_minus_trained_ci"].items()}}


def paired_differences(reference: Sequence[RunData], other: Sequence[RunData],
                       ks: Sequence[int] | None = None) -> dict[str, Any]:
    """B - A for every metric both groups have, JSON-ready: {"pairing", "pairs", "rows" (metric,
    reference, other, difference, ci, problems), "support", "per_pair" (each pair's
    :func:`rlvr.eval.summary.compare` pass@k difference and interval), "source"}."""
    pairs, pairing = pair_runs(reference, other)
    samples = [(a.samples(), b.samples()) for a, b in pairs]
    out: dict[str, Any] = {"pairing": pairing, "pairs": [[a.name, b.name] for a, b in pairs]}
    if any(a is None or b is None for a, b in samples):
        rows = _from_eval_json(pairs) + _retention_rows(pairs)
        return {**out, "rows": rows, "support": None, "per_pair": [],
                "source": "eval.json (no samples.jsonl in every run): differences of means, no interval"}
    pairs_rows = [(list(a), list(b)) for a, b in samples]
    n = min(min(map(len, group_by_problem(rows).values())) for pair in pairs_rows for rows in pair)
    ks = list(ks) if ks else default_ks(n)
    blocks = [compare(a, b, ks=ks, seed=0) for a, b in pairs_rows]
    per_pair = [_pair_block(a, b, block) for (a, b), block in zip(pairs, blocks)]
    rows = _passk_rows(pairs_rows, ks)
    for metric, value in (("token entropy", _token_entropy), ("answer entropy", _answer_entropy)):
        a_P, b_P = _per_problem(pairs_rows, value)
        if a_P[0].size:
            rows.append(_diff_row(metric, a_P, b_P))
    support = _support(pairs_rows, blocks)
    rows += ([support["net"]] if support["net"] else []) + _retention_rows(pairs)
    return {**out, "rows": rows, "support": support, "per_pair": per_pair,
            "source": "samples.jsonl, paired per problem; 95% percentile bootstrap over problems (seed 0)"}
