"""The ``eval.json`` blocks: ``summarize`` (one model) and ``compare`` (base vs trained).

Both are computed from per-problem tallies (:mod:`rlvr.eval.tally`: a file of any size read once),
``summarize`` / ``compare`` tallying validated sample rows (see :mod:`rlvr.eval.samples`) first and
``summarize_tallies`` / ``compare_tallies`` taking tallies made while reading. They return plain
JSON-ready dicts (floats, ints, str keys, lists, None), so a block written with ``json.dump`` and
read back compares equal to a fresh computation.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from rlvr.errors import UserError
from rlvr.eval.entropy import NONE_CATEGORY, entropy_of_counts
from rlvr.eval.majority import maj_at_k
from rlvr.eval.passk import bootstrap_ci, default_ks, pass_at_k_difference_ci, pass_at_k_matrix
from rlvr.eval.samples import normalise_whitespace
from rlvr.eval.support import (
    accuracy_histogram,
    crossover_k,
    crossover_text,
    support_categories_of_counts,
    support_counts,
    support_rates,
)
from rlvr.eval.tally import ExactSum, ProblemTally, Tallies, ToolTally, restrict, tally_rows
from rlvr.rewards.voting import answer_clusters, majority_vote

Row = Mapping[str, Any]
Equal = Callable[[str, str], bool]


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def check_ks(ks: Sequence[int] | None, n: int, fewest: str = "of any problem",
             fix: str = "; pass smaller ks") -> list[int]:
    """``ks`` sorted and deduplicated (None: :func:`default_ks` of ``n``); a UserError unless every k lies in
    1..n, ``n`` being the fewest samples ``fewest`` names."""
    if ks is None:
        return default_ks(n)
    ks = sorted({int(k) for k in ks})
    if not ks or ks[0] < 1 or ks[-1] > n:
        raise UserError(f"ks must lie in 1..{n} (the fewest samples {fewest}), got {ks}{fix}")
    return ks


def _has_answers(tallies: Tallies) -> bool:
    return any(t.has_answer for t in tallies.values())


def _diversity(tallies: Tallies) -> dict[str, float | None]:
    """Mean over problems of distinct correct answers and distinct correct traces (whitespace-normalised)."""
    answers = [len({normalise_whitespace(a) for a, (_, ok) in t.answers.items() if ok and a is not None})
               for t in tallies.values() if t.has_answer]
    traces = [len(t.correct_traces) for t in tallies.values() if t.has_completion]
    return {"distinct_correct_answers": _mean(answers), "distinct_correct_traces": _mean(traces)}


def _maj_at_k(tallies: Tallies, ks: Sequence[int], equal: Equal | None = None) -> dict[str, float] | None:
    """Unbiased maj@k for each k (mean over problems; :func:`rlvr.eval.majority.maj_at_k`): the
    expected accuracy of a majority vote over k of a problem's samples, ties shared. An answer class
    (answers pooled by ``equal``) is correct when one of its samples is. None without answers."""
    if not _has_answers(tallies):
        return None
    total = np.zeros(len(ks))
    for tally in tallies.values():
        distinct = [a for a in tally.answers if a is not None]  # in order of first appearance
        labels, reps, _ = answer_clusters(distinct, equal)
        sizes, correct = [0] * len(reps), [False] * len(reps)
        for c, answer in zip(labels, distinct):
            count, ok = tally.answers[answer]
            sizes[c] += count
            correct[c] = correct[c] or ok
        total += maj_at_k(sizes, correct, tally.answers.get(None, [0])[0], ks)
    return {str(k): float(v) for k, v in zip(ks, total / len(tallies))}


def _majority(tallies: Tallies, equal: Equal | None = None) -> dict[str, float | None]:
    """maj@n and the parsable share (None when rows carry no answers).

    maj@n: per problem, the most frequent parsable answer of its samples wins the vote (answers
    pooled by ``equal``, the task's equivalence; None: stripped strings; ties: the one seen first,
    as in training's majority-vote reward); the problem counts as solved when a correct sample
    gave that answer. A problem with no parsable answer counts as unsolved.
    parsable: the share of samples with an answer (not None)."""
    if not _has_answers(tallies):
        return {"majority_accuracy": None, "parsable": None}
    solved, parsed, total = [], 0, 0
    for tally in tallies.values():
        group = tally.answer_list()
        # True where a sample's answer is equivalent to the majority answer (the same for equal answers)
        agrees = dict(zip(group, majority_vote(group, equal)[0]))
        solved.append(float(any(agrees[a] and ok for a, (_, ok) in tally.answers.items() if a is not None)))
        parsed += tally.n - tally.answers.get(None, [0])[0]
        total += tally.n
    return {"majority_accuracy": _mean(solved), "parsable": parsed / total}


def _answer_entropy_of(tally: ProblemTally) -> float:
    """Entropy (nats) of one problem's whitespace-normalised answers, no answer one more category
    (:func:`rlvr.eval.entropy.answer_entropy_of`), the counts in order of first appearance."""
    counts: dict[str, int] = {}
    for answer, (count, _) in tally.answers.items():
        key = NONE_CATEGORY if answer is None else normalise_whitespace(answer)
        counts[key] = counts.get(key, 0) + count
    return entropy_of_counts(counts.values())


def _entropies(tallies: Tallies) -> dict[str, float | None]:
    """Token entropy: the token-weighted mean of the samples' mean entropies; answer entropy: the
    mean over problems of :func:`_answer_entropy_of` (None without answers)."""
    weighted, tokens = ExactSum(), 0
    for tally in tallies.values():
        weighted.merge(tally.entropy_sum)
        tokens += tally.entropy_tokens
    answers = [_answer_entropy_of(t) for t in tallies.values()] if _has_answers(tallies) else []
    return {"token_entropy": weighted.value() / tokens if tokens > 0 else None, "answer_entropy": _mean(answers)}


def _row_stats(tallies: Tallies) -> dict[str, Any]:
    rewards, reward_count, length_sum, length_count = ExactSum(), 0, 0, 0
    reasons: dict[str, int] = {}
    for tally in tallies.values():
        rewards.merge(tally.reward_sum)
        reward_count += tally.rewards
        length_sum += tally.length_sum
        length_count += tally.lengths
        for reason, count in tally.finish_reasons.items():
            reasons[reason] = reasons.get(reason, 0) + count
    return {
        "mean_reward": rewards.value() / reward_count if reward_count else None,
        "mean_num_tokens": float(length_sum) / length_count if length_count else None,
        "finish_reasons": dict(sorted(reasons.items())),
    }


def tool_call_stats(rows: Sequence[Row]) -> dict[str, Any]:
    """A tool task's episode statistics (``{}`` when no row has ``tool_calls``): policy turns and tool calls per
    episode, the share of calls that failed, the share of episodes with a call, and the accuracy of the
    episodes with and without a call (None when there are none of them); :func:`tool_stats_of_tallies`
    of the rows' tallies."""
    return tool_stats_of_tallies(tally_rows(rows))


def tool_stats_of_tallies(tallies: Tallies) -> dict[str, Any]:
    """:func:`tool_call_stats` from per-problem tallies (:class:`rlvr.eval.tally.ToolTally`: integer
    counts, so the numbers equal those computed from the rows)."""
    pooled = ToolTally()
    for tally in tallies.values():
        if tally.tools is not None:
            pooled.merge(tally.tools)
    episodes = pooled.episodes
    if not episodes:
        return {}
    without = episodes - pooled.with_call
    return {"tool_calls": {
        "turns_per_episode": pooled.turns / pooled.turn_episodes if pooled.turn_episodes else None,
        "calls_per_episode": pooled.calls / episodes,
        "failed_call_share": pooled.failed / pooled.calls if pooled.calls else None,
        "episodes_with_call": pooled.with_call / episodes,
        "accuracy_with_call": pooled.correct_with_call / pooled.with_call if pooled.with_call else None,
        "accuracy_without_call": pooled.correct_without_call / without if without else None,
        "env_tokens_per_episode": float(pooled.env_tokens) / episodes,
    }}


def summarize(
    rows: Sequence[Row], ks: Sequence[int] | None = None, seed: int = 0, equal: Equal | None = None
) -> dict[str, Any]:
    """The eval.json block of one model from its validated sample rows (:func:`summarize_tallies`)."""
    if not rows:
        raise UserError("no samples to evaluate; pass a non-empty samples file")
    return summarize_tallies(tally_rows(rows), ks, seed, equal)


def summarize_tallies(
    tallies: Tallies, ks: Sequence[int] | None = None, seed: int = 0, equal: Equal | None = None
) -> dict[str, Any]:
    """The eval.json block of one model.

    ``n`` is the number of samples per problem; when problems differ it is the
    smallest, ``notes`` says so, and pass@k is computed for k <= n (each problem
    still uses all its samples in the unbiased estimator). ``ks`` defaults to
    powers of two up to n plus n. CIs: 95% percentile bootstrap over problems.
    ``equal(a, b)``: the task's answer equivalence for the majority vote (maj@n), e.g.
    :func:`rlvr.tasks.base.task_equivalence`; None compares stripped strings.
    """
    if not tallies:
        raise UserError("no samples to evaluate; pass a non-empty samples file")
    n_per = [t.n for t in tallies.values()]
    c_per = [t.correct for t in tallies.values()]
    n = min(n_per)
    ks = check_ks(ks, n)
    per_problem = pass_at_k_matrix(n_per, c_per, ks)  # (P, K)
    lo, hi = bootstrap_ci(per_problem, seed=seed)
    notes = []
    if max(n_per) != n:
        notes.append(f"problems have {n}..{max(n_per)} samples; n is the smallest and pass@k uses k <= {n}")
    return {
        "n": n,
        "problems": len(tallies),
        "samples": sum(n_per),
        "samples_per_problem": {"min": n, "max": max(n_per)},
        "pass_at_k": {str(k): float(v) for k, v in zip(ks, per_problem.mean(axis=0))},
        "pass_at_k_ci": {str(k): [float(a), float(b)] for k, a, b in zip(ks, lo, hi)},
        **_entropies(tallies),
        **_row_stats(tallies),
        "accuracy_histogram": accuracy_histogram(n_per, c_per),
        **_diversity(tallies),
        **_majority(tallies, equal),
        "maj_at_k": _maj_at_k(tallies, ks, equal),
        **tool_stats_of_tallies(tallies),
        "notes": notes,
    }


def support_block(
    base_rows: Sequence[Row], trained_rows: Sequence[Row], k: int | None = None
) -> dict[str, Any]:
    """Support categories, counts and rates of the problems present in both row sets."""
    return support_of_tallies(tally_rows(base_rows), tally_rows(trained_rows), k)


def support_of_tallies(base: Tallies, trained: Tallies, k: int | None = None) -> dict[str, Any]:
    """:func:`support_block` from tallies: each side's samples and its first correct one per problem."""
    categories = support_categories_of_counts({p: (t.n, t.first_correct) for p, t in base.items()},
                                              {p: (t.n, t.first_correct) for p, t in trained.items()}, k)
    used = [min(base[p].n, trained[p].n, k or base[p].n) for p in categories]
    counts = support_counts(categories)
    return {
        "n": min(used) if used else None,
        "problems": len(categories),
        "counts": counts,
        "rates": support_rates(counts),
        "categories": categories,
    }


def _paired_pass_at_k(base: Tallies, trained: Tallies, ks: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Per-problem pass@k (P, K) of both models over their common problems, rows aligned (base order)."""
    ids = [p for p in base if p in trained]

    def matrix(tallies: Tallies) -> np.ndarray:
        return pass_at_k_matrix([tallies[p].n for p in ids], [tallies[p].correct for p in ids], ks)

    return matrix(base), matrix(trained)


def compare(
    base_rows: Sequence[Row],
    trained_rows: Sequence[Row],
    ks: Sequence[int] | None = None,
    perplexity_under_base: Mapping[str, Any] | None = None,
    seed: int = 0,
    equal: Equal | None = None,
) -> dict[str, Any]:
    """The eval.json pair block from both models' validated sample rows (:func:`compare_tallies`)."""
    return compare_tallies(tally_rows(base_rows), tally_rows(trained_rows), ks, perplexity_under_base, seed, equal)


def compare_tallies(
    base_all: Tallies,
    trained_all: Tallies,
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
    common = set(base_all) & set(trained_all)
    if not common:
        raise UserError(
            "no problem_id appears in both the base and the trained samples; evaluate the same problems"
        )
    base_kept, trained_kept = restrict(base_all, common), restrict(trained_all, common)
    n_base = min(t.n for t in base_kept.values())
    n_trained = min(t.n for t in trained_kept.values())
    ks = check_ks(ks, min(n_base, n_trained))
    base = summarize_tallies(base_kept, ks, seed, equal)
    trained = summarize_tallies(trained_kept, ks, seed, equal)
    base_P_K, trained_P_K = _paired_pass_at_k(base_kept, trained_kept, ks)
    cross = crossover_k(ks, base_P_K, trained_P_K, seed=seed)
    diff_lo, diff_hi = pass_at_k_difference_ci(base_P_K, trained_P_K, seed=seed)
    out: dict[str, Any] = {
        "base": base,
        "trained": trained,
        "support": support_of_tallies(base_kept, trained_kept),
        "crossover_k": cross,
        "crossover": {
            "k": cross,
            "k_max": ks[-1],
            "text": crossover_text(cross, ks[-1]),
            "base_minus_trained_ci": {str(k): [float(a), float(b)] for k, a, b in zip(ks, diff_lo, diff_hi)},
        },
        "problems": {
            "common": len(common),
            "base_only": len(set(base_all) - common),
            "trained_only": len(set(trained_all) - common),
        },
    }
    if perplexity_under_base is not None:
        out["perplexity_under_base"] = dict(perplexity_under_base)
    return out
