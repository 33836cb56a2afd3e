"""Majority voting over one group's extracted answers, in plain Python (no torch): the clusters of
equivalent answers and the vote. Training's majority-vote reward
(:func:`rlvr.rewards.intrinsic.majority_vote_reward`) and ``rlvr eval``'s maj@k and maj@n
(:mod:`rlvr.eval.summary`) share it, so reading samples files needs no tensor library.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence


def answer_clusters(
    group: Sequence[str | None], equal: Callable[[str, str], bool] | None
) -> tuple[list[int | None], list[str], list[int]]:
    """Cluster one group's answers: (cluster of each sample, None where unparsable; each cluster's
    stripped representative, its first-seen answer; the index in the group of that answer).

    Answers are taken in group order; each distinct stripped answer joins the first cluster whose
    representative it is equivalent to (``equal``; None: equal stripped strings), or starts a new
    one. ``equal`` runs once per distinct answer and representative."""
    keys = [None if a is None else a.strip() for a in group]
    reps: list[str] = []
    first: list[int] = []
    cluster: dict[str, int] = {}  # distinct stripped answer -> its cluster
    for i, k in enumerate(keys):
        if k is None or k in cluster:
            continue
        # the first cluster whose representative it is equivalent to, in creation order
        c = next((j for j, r in enumerate(reps) if equal(k, r)), None) if equal is not None else None
        if c is None:
            c = len(reps)
            reps.append(k)
            first.append(i)
        cluster[k] = c
    return [None if k is None else cluster[k] for k in keys], reps, first


def majority_vote(
    group: Sequence[str | None], equal: Callable[[str, str], bool] | None
) -> tuple[list[bool], str | None, float]:
    """One group's majority vote: (equivalent to the majority per sample, majority answer, label share);
    the rules are :func:`rlvr.rewards.intrinsic.majority_vote_reward`'s (which calls this per group)."""
    labels, reps, first = answer_clusters(group, equal)
    counts = [0] * len(reps)
    for c in labels:
        if c is not None:
            counts[c] += 1
    if not counts:
        return [False] * len(group), None, 0.0
    w = max(range(len(counts)), key=lambda j: (counts[j], -j))  # most votes; ties: created first
    # An answer placed in cluster c was compared with the representatives 0..c (all but c unequal), so
    # its equivalence to the majority's representative is known unless its cluster is older (c < w).
    keys = [None if a is None else a.strip() for a in group]
    agrees = {k: c == w or (c < w and equal is not None and bool(equal(k, reps[w])))
              for k, c in dict(zip(keys, labels)).items() if k is not None}
    return [k is not None and agrees[k] for k in keys], group[first[w]], counts[w] / sum(counts)
