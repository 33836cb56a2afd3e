"""Answer-level and token-level entropy (Invisible Leash, 2507.14843), in nats.

- answer-level: Shannon entropy of the empirical distribution of distinct final
  answers of one problem's samples, averaged over problems. Answers are compared
  after whitespace normalisation. Unparsed answers (``None``) are by default one
  extra category, ``"none"`` (a model that often fails to answer is not
  rewarded with low entropy); ``none_policy="drop"`` ignores them instead, and a
  problem with no parsed answer then has no entropy and is skipped.
- token-level: mean over positions and samples of the next-token entropy; from
  per-sample ``mean_entropy`` and ``num_tokens`` this is the token-weighted mean.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from rlvr.errors import UserError
from rlvr.eval.samples import normalise_whitespace

NONE_CATEGORY = "\x00none"  # cannot collide with a real (whitespace-normalised) answer


def entropy_of_counts(counts: Iterable[int | float]) -> float:
    """Shannon entropy (nats) of the distribution proportional to ``counts``; zeros ignored."""
    arr = np.asarray(list(counts), dtype=np.float64)
    if arr.size == 0 or (arr < 0).any() or arr.sum() <= 0:
        raise UserError(f"entropy needs non-negative counts with a positive total, got {arr.tolist()}")
    p = arr[arr > 0] / arr.sum()
    return float(max(0.0, -(p * np.log(p)).sum()))


def answer_entropy_of(answers: Sequence[str | None], none_policy: str = "category") -> float | None:
    """Entropy (nats) of one problem's answers; None when nothing is left to count."""
    if none_policy not in ("category", "drop"):
        raise UserError(f"none_policy must be 'category' or 'drop', got {none_policy!r}; pick one of those")
    keys = [
        normalise_whitespace(a) if a is not None else NONE_CATEGORY
        for a in answers
        if a is not None or none_policy == "category"
    ]
    if not keys:
        return None
    return entropy_of_counts(Counter(keys).values())


def answer_entropy(
    answers_by_problem: Mapping[str, Sequence[str | None]], none_policy: str = "category"
) -> float | None:
    """Mean over problems of the per-problem answer entropy (nats); None if no problem has one."""
    values = [answer_entropy_of(a, none_policy) for a in answers_by_problem.values()]
    kept = [v for v in values if v is not None]
    return math.fsum(kept) / len(kept) if kept else None


def token_entropy(mean_entropy: Sequence[float], num_tokens: Sequence[int]) -> float | None:
    """Token-weighted mean of per-sample mean next-token entropies (nats): (B,), (B,) -> float.

    None when there are no tokens at all.
    """
    if len(mean_entropy) != len(num_tokens):
        raise UserError(
            f"got {len(mean_entropy)} entropies but {len(num_tokens)} lengths; pass one per sample"
        )
    total = sum(num_tokens)
    if total <= 0:
        return None
    return math.fsum(h * t for h, t in zip(mean_entropy, num_tokens)) / total
