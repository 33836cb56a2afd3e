"""The ``eval.json`` blocks: ``summarize`` (one model) and ``compare`` (base vs trained).

Both take validated sample rows (see :mod:`rlvr.eval.samples`) and return plain
JSON-ready dicts (floats, ints, str keys, lists, None), so a block written with
``json.dump`` and read back compares equal to a fresh computation.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from rlvr.errors import UserError
from rlvr.eval.entropy import answer_entropy, token_entropy
from rlvr.eval.majority import maj_at_k
from rlvr.eval.passk import bootstrap_ci, default_ks, pass_at_k_difference_ci, pass_at_k_matrix
from rlvr.eval.samples import group_by_problem, is_correct
from rlvr.eval.support import (
    accuracy_histogram,
    crossover_k,
    crossover_text,
    distinct_correct,
    support_categories,
    support_counts,
    support_rates,
)
from rlvr.rewards.intrinsic import answer_clusters, majority_vote_reward

Row = Mapping[str, Any]
Equal = Callable[[str, str], bool]


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def _check_ks(ks: Sequence[int] | None, n: int) -> list[int]:
    if ks is None:
        return default_ks(n)
    ks = sorted({int(k) for k in ks})
    if not ks or ks[0] < 1 or ks[-1] > n:
        raise UserError(
            f"ks must lie in 1..{n} (the fewest samples of any problem), got {ks}; pass smaller ks"
        )
    return ks


def _diversity(groups: Mapping[str, Sequence[Row]]) -> dict[str, float | None]:
    """Mean over problems of distinct correct answers and distinct correct traces."""
    answers, traces = [], []
    for rows in groups.values():
        ok = [is_correct(r) for r in rows]
        if any("answer" in r for r in rows):
            answers.append(distinct_correct([r.get("answer") for r in rows], ok))
        if any("completion" in r for r in rows):
            traces.append(distinct_correct([r.get("completion") for r in rows], ok))
    return {"distinct_correct_answers": _mean(answers), "distinct_correct_traces": _mean(traces)}


def _maj_at_k(groups: Mapping[str, Sequence[Row]], ks: Sequence[int], equal: Equal | None = None,
              ) -> dict[str, float] | None:
    """Unbiased maj@k for each k (mean over problems; :func:`rlvr.eval.majority.maj_at_k`): the
    expected accuracy of a majority vote over k of a problem's samples, ties shared. An answer class
    (answers pooled by ``equal``) is correct when one of its samples is. None without answers."""
    if not any("answer" in r for g in groups.values() for r in g):
        return None
    total = np.zeros(len(ks))
    for rows in groups.values():
        labels, reps, _ = answer_clusters([r.get("answer") for r in rows], equal)
        sizes, correct = [0] * len(reps), [False] * len(reps)
        for c, r in zip(labels, rows):
            if c is not None:
                sizes[c] += 1
                correct[c] = correct[c] or is_correct(r)
        total += maj_at_k(sizes, correct, labels.count(None), ks)
    return {str(k): float(v) for k, v in zip(ks, total / len(groups))}


def _majority(groups: Mapping[str, Sequence[Row]], equal: Equal | None = None) -> dict[str, float | None]:
    """maj@n and the parsable share (None when rows carry no answers).

    maj@n: per problem, the most frequent parsable answer of its samples wins the vote (answers
    pooled by ``equal``, the task's equivalence; None: stripped strings; ties: the one seen first,
    as in training's majority-vote reward); the problem counts as solved when a correct sample
    gave that answer. A problem with no parsable answer counts as unsolved.
    parsable: the share of samples with an answer (not None)."""
    if not any("answer" in r for g in groups.values() for r in g):
        return {"majority_accuracy": None, "parsable": None}

    solved, parsed, total = [], 0, 0
    for rows in groups.values():
        answers = [r.get("answer") for r in rows]
        # 1.0 where a sample's answer is equivalent to the majority answer
        agrees = majority_vote_reward([answers], equal=equal)[0][0].tolist()
        solved.append(float(any(a == 1.0 and is_correct(r) for a, r in zip(agrees, rows))))
        parsed += sum(a is not None for a in answers)
        total += len(rows)
    return {"majority_accuracy": _mean(solved), "parsable": parsed / total}


def _entropies(rows: Sequence[Row], groups: Mapping[str, Sequence[Row]]) -> dict[str, float | None]:
    with_h = [r for r in rows if r.get("mean_entropy") is not None and r.get("num_tokens") is not None]
    tok = token_entropy([r["mean_entropy"] for r in with_h], [r["num_tokens"] for r in with_h])
    has_answers = any("answer" in r for r in rows)
    ans = (
        answer_entropy({p: [r.get("answer") for r in g] for p, g in groups.items()}) if has_answers else None
    )
    return {"token_entropy": tok, "answer_entropy": ans}


def _row_stats(rows: Sequence[Row]) -> dict[str, Any]:
    rewards = [float(r["reward"]) for r in rows if r.get("reward") is not None]
    lengths = [r["num_tokens"] for r in rows if r.get("num_tokens") is not None]
    reasons = Counter(r["finish_reason"] for r in rows if r.get("finish_reason") is not None)
    return {
        "mean_reward": _mean(rewards),
        "mean_num_tokens": _mean(lengths),
        "finish_reasons": dict(sorted(reasons.items())),
    }


def tool_call_stats(rows: Sequence[Row]) -> dict[str, Any]:
    """A tool task's episode statistics (``{}`` when no row has ``tool_calls``): policy turns and tool
    calls per episode, the share of calls that failed, the share of episodes with a call, and the accuracy of the
    episodes with and without a call (None when there are none of them)."""
    episodes = [r for r in rows if r.get("tool_calls") is not None]
    if not episodes:
        return {}
    calls = sum(r["tool_calls"] for r in episodes)
    with_call = [is_correct(r) for r in episodes if r["tool_calls"]]
    without = [is_correct(r) for r in episodes if not r["tool_calls"]]
    return {"tool_calls": {
        "turns_per_episode": _mean([r["turns"] for r in episodes if r.get("turns") is not None]),
        "calls_per_episode": calls / len(episodes),
        "failed_call_share": sum(r.get("failed_calls") or 0 for r in episodes) / calls if calls else None,
        "episodes_with_call": len(with_call) / len(episodes),
        "accuracy_with_call": _mean(with_call),
        "accuracy_without_call": _mean(without),
        "env_tokens_per_episode": _mean([r.get("env_tokens") or 0 for r in episodes]),
    }}


def summarize(
    rows: Sequence[Row], ks: Sequence[int] | None = None, seed: int = 0, equal: Equal | None = None
) -> dict[str, Any]:
    """The eval.json block of one model.

    ``n`` is the number of samples per problem; when problems differ it is the
    smallest, ``notes`` says so, and pass@k is computed for k <= n (each problem
    still uses all its samples in the unbiased estimator). ``ks`` defaults to
    powers of two up to n plus n. CIs: 95% percentile bootstrap over problems.
    ``equal(a, b)``: the task's answer equivalence for the majority vote (maj@n), e.g.
    :func:`rlvr.tasks.base.task_equivalence`; None compares stripped strings.
    """
    if not rows:
        raise UserError("no samples to evaluate; pass a non-empty samples file")
    groups = group_by_problem(rows)
    n_per = [len(g) for g in groups.values()]
    c_per = [sum(is_correct(r) for r in g) for g in groups.values()]
    n = min(n_per)
    ks = _check_ks(ks, n)
    per_problem = pass_at_k_matrix(n_per, c_per, ks)  # (P, K)
    lo, hi = bootstrap_ci(per_problem, seed=seed)
    notes = []
    if max(n_per) != n:
        notes.append(f"problems have {n}..{max(n_per)} samples; n is the smallest and pass@k uses k <= {n}")
    return {
        "n": n,
        "problems": len(groups),
        "samples": len(rows),
        "samples_per_problem": {"min": n, "max": max(n_per)},
        "pass_at_k": {str(k): float(v) for k, v in zip(ks, per_problem.mean(axis=0))},
        "pass_at_k_ci": {str(k): [float(a), float(b)] for k, a, b in zip(ks, lo, hi)},
        **_entropies(rows, groups),
        **_row_stats(rows),
        "accuracy_histogram": accuracy_histogram(n_per, c_per),
        **_diversity(groups),
        **_majority(groups, equal),
        "maj_at_k": _maj_at_k(groups, ks, equal),
        **tool_call_stats(rows),
        "notes": notes,
    }


def support_block(
    base_rows: Sequence[Row], trained_rows: Sequence[Row], k: int | None = None
) -> dict[str, Any]:
    """Support categories, counts and rates of the problems present in both row sets."""
    base = {p: [is_correct(r) for r in g] for p, g in group_by_problem(base_rows).items()}
    trained = {p: [is_correct(r) for r in g] for p, g in group_by_problem(trained_rows).items()}
    categories = support_categories(base, trained, k)
    used = [min(len(base[p]), len(trained[p]), k or len(base[p])) for p in categories]
    counts = support_counts(categories)
    return {
        "n": min(used) if used else None,
        "problems": len(categories),
        "counts": counts,
        "rates": support_rates(counts),
        "categories": categories,
    }


def _paired_pass_at_k(
    base_rows: Sequence[Row], trained_rows: Sequence[Row], ks: Sequence[int]
) -> tuple[np.ndarray, np.ndarray]:
    """Per-problem pass@k (P, K) of both models over their common problems, rows aligned (base order)."""
    base_g, trained_g = group_by_problem(base_rows), group_by_problem(trained_rows)
    ids = [p for p in base_g if p in trained_g]

    def matrix(groups: Mapping[str, Sequence[Row]]) -> np.ndarray:
        n = [len(groups[p]) for p in ids]
        c = [sum(is_correct(r) for r in groups[p]) for p in ids]
        return pass_at_k_matrix(n, c, ks)

    return matrix(base_g), matrix(trained_g)


def compare(
    base_rows: Sequence[Row],
    trained_rows: Sequence[Row],
    ks: Sequence[int] | None = None,
    perplexity_under_base: Mapping[str, Any] | None = None,
    seed: int = 0,
    equal: Equal | None = None,
) -> dict[str, Any]:
    """The eval.json pair block, over the problems present in both row sets only.

    ``problems`` says how many were common and how many were dropped from each side.
    Both models are summarised on the same ks (default: from the smaller n).
    ``perplexity_under_base`` (computed elsewhere, with a model) is passed through.
    ``crossover_k`` is the smallest k at which base pass@k is above trained pass@k beyond the
    95% paired bootstrap interval of the difference over problems (``seed``), None if no k
    qualifies; ``crossover`` holds it with ``k_max``, the ``text`` to print ("k=4" or "none up
    to k=16") and that interval per k (``base_minus_trained_ci``). ``equal``: see :func:`summarize`.
    """
    base_ids = set(group_by_problem(base_rows))
    trained_ids = set(group_by_problem(trained_rows))
    common = base_ids & trained_ids
    if not common:
        raise UserError(
            "no problem_id appears in both the base and the trained samples; evaluate the same problems"
        )
    base_kept = [r for r in base_rows if r["problem_id"] in common]
    trained_kept = [r for r in trained_rows if r["problem_id"] in common]
    n_base = min(Counter(r["problem_id"] for r in base_kept).values())
    n_trained = min(Counter(r["problem_id"] for r in trained_kept).values())
    ks = _check_ks(ks, min(n_base, n_trained))
    base = summarize(base_kept, ks, seed, equal)
    trained = summarize(trained_kept, ks, seed, equal)
    base_P_K, trained_P_K = _paired_pass_at_k(base_kept, trained_kept, ks)
    cross = crossover_k(ks, base_P_K, trained_P_K, seed=seed)
    diff_lo, diff_hi = pass_at_k_difference_ci(base_P_K, trained_P_K, seed=seed)
    out: dict[str, Any] = {
        "base": base,
        "trained": trained,
        "support": support_block(base_kept, trained_kept),
        "crossover_k": cross,
        "crossover": {
            "k": cross,
            "k_max": ks[-1],
            "text": crossover_text(cross, ks[-1]),
            "base_minus_trained_ci": {str(k): [float(a), float(b)] for k, a, b in zip(ks, diff_lo, diff_hi)},
        },
        "problems": {
            "common": len(common),
            "base_only": len(base_ids - common),
            "trained_only": len(trained_ids - common),
        },
    }
    if perplexity_under_base is not None:
        out["perplexity_under_base"] = dict(perplexity_under_base)
    return out
