"""Intrinsic (label-free) rewards and the diagnostics logged beside them (docs/methods/unsupervised_rlvr.md).

Shapes: P prompts, G samples per prompt, B = P*G completions, T completion tokens
(right-padded), V vocabulary. Per-position quantities come from logits ``(..., V)``;
sequence-level rewards take the per-token tensors the sampler returns
(:class:`rlvr.types.RolloutBatch`: ``self_certainty``, ``entropy``, ``behaviour_logp``)
and a ``mask (B, T)`` of the tokens that count (the sampled ones: ``loss_mask``).

Papers: RLIF / Intuitor (self-certainty, 2505.19590), TTRL (majority vote, 2504.16084),
the unsupervised-RLVR taxonomy and rise-and-fall analysis (2603.08660).

Pure torch, no I/O. An empty completion (no masked token) gets reward 0 from the
mean-over-tokens rewards; its sequence probability is exp(0) = 1.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch

from rlvr.rewards.voting import majority_vote

__all__ = [
    "INTRINSIC_REWARDS",
    "REWARD_INPUTS",
    "combine",
    "failure_signals",
    "answer_cluster_reward",
    "majority_vote_reward",
    "neg_entropy_reward",
    "proxy_diagnostics",
    "repeated_ngram_share",
    "self_certainty_from_logits",
    "self_certainty_reward",
    "sequence_probability_reward",
    "token_entropy_from_logits",
    "top2_margin_from_logits",
    "top2_margin_reward",
    "trajectory_likelihood_reward",
]


# ---------------------------------------------------------------- per position (from logits)


def self_certainty_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """KL(U || softmax(z)) per position: logsumexp(z) - mean(z) - log V.

    logits: (..., V) -> (...) float32, >= 0, exactly 0 for a uniform distribution.
    The -log V constant is kept (some public code drops it; it shifts every reward
    equally but changes the scale a reader compares against). A logit of -inf (a
    masked vocabulary entry) gives +inf, which is the true KL.
    """
    z = logits.float()
    V = z.shape[-1]
    return torch.logsumexp(z, dim=-1) - z.mean(dim=-1) - math.log(V)


def token_entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Next-token entropy H(softmax(z)) in nats per position.

    logits: (..., V) -> (...) float32, in [0, log V]. Entries with zero probability
    (logit -inf) contribute 0, not NaN.
    """
    logp = torch.log_softmax(logits.float(), dim=-1)
    p = logp.exp()
    return -torch.where(p > 0, p * logp, torch.zeros_like(p)).sum(dim=-1)


def top2_margin_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Top-1 minus top-2 probability per position (another confidence proxy in the taxonomy).

    logits: (..., V) with V >= 2 -> (...) float32 in [0, 1].
    """
    top = torch.softmax(logits.float(), dim=-1).topk(2, dim=-1).values
    return top[..., 0] - top[..., 1]


# ---------------------------------------------------------------- sequence level (B,)


def _masked_sum_len(x_B_T: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    if x_B_T.shape != mask.shape:
        raise ValueError(f"per-token tensor {tuple(x_B_T.shape)} and mask {tuple(mask.shape)} differ")
    m = mask.bool()
    # where(), not multiply: padded positions may hold -inf or NaN.
    total = torch.where(m, x_B_T.float(), torch.zeros((), dtype=torch.float32, device=x_B_T.device))
    return total.sum(-1), m.sum(-1)


def _masked_mean(x_B_T: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    total, n = _masked_sum_len(x_B_T, mask)
    return total / n.clamp(min=1)


def self_certainty_reward(sc_B_T: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Self-certainty (Intuitor): (1/|y|) sum_t KL(U || pi(.|x, y_<t)).  (B, T), (B, T) -> (B,)."""
    return _masked_mean(sc_B_T, mask)


def neg_entropy_reward(ent_B_T: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Negative mean token entropy: -(1/|y|) sum_t H(pi(.|x, y_<t)).  (B, T), (B, T) -> (B,)."""
    return -_masked_mean(ent_B_T, mask)


def top2_margin_reward(m_B_T: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean top-2 probability margin: (1/|y|) sum_t [p_(1) - p_(2)](pi(.|x, y_<t)).  (B, T), (B, T) -> (B,)."""
    return _masked_mean(m_B_T, mask)


def trajectory_likelihood_reward(logp_B_T: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Length-normalised log-likelihood (1/|y|) log pi(y|x) = (1/|y|) sum_t logp.  -> (B,)."""
    return _masked_mean(logp_B_T, mask)


def sequence_probability_reward(logp_B_T: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Sequence probability pi(y|x) = exp(sum_t logp).  -> (B,) in [0, 1].

    Not length-normalised, so it favours short answers: the length-collapse failure mode.
    """
    total, _ = _masked_sum_len(logp_B_T, mask)
    return total.exp()


def majority_vote_reward(
    answers_P_G: Sequence[Sequence[str | None]],
    min_share: float = 0.0,
    equal: Callable[[str, str], bool] | None = None,
) -> tuple[torch.Tensor, list[str | None], list[float]]:
    """TTRL majority vote: reward 1 if a completion's answer is equivalent to its group's majority answer.

    answers_P_G: P groups of G extracted answers (None = unparsable). Returns
    ``(reward_P_G (P, G) float32, majority answer per group, label share per group)``.

    - ``equal(a, b)``: the task's answer equivalence (:func:`rlvr.tasks.base.task_equivalence`,
      e.g. math-verify so "0.5" and "1/2" vote together); None = equal strings after ``str.strip``.
      It gets stripped answers, and ``a`` is always the newcomer, ``b`` a representative.
    - Clustering is deterministic: answers are taken in group order; each distinct (stripped)
      answer joins the first existing cluster whose representative (its first-seen answer) it is
      equivalent to, or starts a new one. ``equal`` runs once per distinct answer and representative.
    - The majority is the cluster with the most votes; ties go to the cluster created first (the
      answer seen first). The majority answer returned is its representative, as written.
    - A sample's reward is whether its answer is equivalent to that representative (its cluster
      members are; for a non-transitive ``equal`` an answer of an older cluster may be too).
    - Unparsable answers are dropped before voting and get reward 0.
    - The label share is the majority cluster's votes / parsable answers in the group
      (0.0 when none parses; the majority is then None and all rewards are 0).
    - A group whose label share is below ``min_share`` (TTRL's voting threshold) gets
      all-zero rewards; its majority answer is still returned, for label accuracy.
    """
    if not 0.0 <= min_share <= 1.0:
        raise ValueError(f"min_share={min_share} is not in [0, 1]")
    G = len(answers_P_G[0]) if answers_P_G else 0
    rewards: list[list[float]] = []
    majorities: list[str | None] = []
    shares: list[float] = []
    for p, group in enumerate(answers_P_G):
        if len(group) != G:
            raise ValueError(f"group {p} has {len(group)} answers, group 0 has {G}; groups must be equal")
        agrees, majority, share = majority_vote(group, equal)
        keep = majority is not None and share >= min_share
        rewards.append([1.0 if keep and ok else 0.0 for ok in agrees])
        majorities.append(majority)
        shares.append(share)
    return torch.tensor(rewards, dtype=torch.float32).reshape(len(answers_P_G), G), majorities, shares


def answer_cluster_reward(
    answers_P_G: Sequence[Sequence[str | None]],
    equal: Callable[[str, str], bool] | None = None,
) -> torch.Tensor:
    """Answer-cluster reward: the share of its group's parsable answers that fall in a completion's
    answer cluster (the soft form of the majority vote: every cluster is rewarded by its size).

    answers_P_G: P groups of G extracted answers (None = unparsable, reward 0). Clusters are built as
    in :func:`majority_vote_reward` (``equal``: the task's answer equivalence; None = equal stripped
    strings). -> reward_P_G (P, G) float32 in [0, 1]; a group with one parsable answer gives it 1.
    """
    out: list[list[float]] = []
    for group in answers_P_G:
        keys = [None if a is None else a.strip() for a in group]
        reps: list[str] = []
        counts: list[int] = []
        of: list[int | None] = []
        for k in keys:
            if k is None:
                of.append(None)
                continue
            c = next((j for j, r in enumerate(reps) if (equal(k, r) if equal is not None else k == r)), None)
            if c is None:
                c = len(reps)
                reps.append(k)
                counts.append(0)
            counts[c] += 1
            of.append(c)
        n = sum(counts)
        out.append([0.0 if c is None else counts[c] / n for c in of])
    return torch.tensor(out, dtype=torch.float32).reshape(len(answers_P_G), -1 if answers_P_G else 0)


def combine(rewards: dict[str, torch.Tensor], weights: dict[str, float]) -> torch.Tensor:
    """Weighted sum sum_k weights[k] * rewards[k] of same-shape reward tensors.

    Mix intrinsic rewards with each other or with an external verifier's reward
    (e.g. ``{"verifier": r, "self_certainty": sc}``). Every weight must name a reward;
    rewards without a weight are ignored (so diagnostics can ride along).
    """
    if not weights:
        raise ValueError("combine() needs at least one weight")
    missing = sorted(set(weights) - set(rewards))
    if missing:
        raise ValueError(f"weights name rewards {missing} that were not given; have {sorted(rewards)}")
    names = list(weights)
    shape = rewards[names[0]].shape
    out = torch.zeros(shape, dtype=torch.float32, device=rewards[names[0]].device)
    for name in names:
        if rewards[name].shape != shape:
            raise ValueError(f"reward {name!r} has shape {tuple(rewards[name].shape)}, not {tuple(shape)}")
        out = out + float(weights[name]) * rewards[name].float()
    return out


INTRINSIC_REWARDS: dict[str, Callable[..., object]] = {
    "self_certainty": self_certainty_reward,
    "neg_entropy": neg_entropy_reward,
    "trajectory_likelihood": trajectory_likelihood_reward,
    "sequence_probability": sequence_probability_reward,
    "majority_vote": majority_vote_reward,
    "top2_margin": top2_margin_reward,
    "answer_cluster": answer_cluster_reward,
}
"""Sequence-level intrinsic rewards by name. All but ``majority_vote`` take
``(per_token_B_T, mask_B_T) -> reward_B``; ``majority_vote`` and ``answer_cluster`` take answers (see above)."""

REWARD_INPUTS: dict[str, str] = {
    "self_certainty": "self_certainty",
    "neg_entropy": "entropy",
    "trajectory_likelihood": "behaviour_logp",
    "sequence_probability": "behaviour_logp",
    "majority_vote": "answers",
    "top2_margin": "top2_margin",
    "answer_cluster": "answers",
}
"""Which :class:`rlvr.types.RolloutBatch` field each reward reads (``answers``: the
extracted answers, grouped P x G, which the trainer gets from the task's verifier)."""


# ---------------------------------------------------------------- diagnostics (pure)


def _pearson(x: torch.Tensor, y: torch.Tensor) -> float | None:
    x, y = x.double().flatten(), y.double().flatten()
    ok = torch.isfinite(x) & torch.isfinite(y)
    x, y = x[ok], y[ok]
    if x.numel() < 2:
        return None
    dx, dy = x - x.mean(), y - y.mean()
    denom = (dx.square().sum() * dy.square().sum()).sqrt()
    if denom <= 0:
        return None  # a constant side: the correlation is undefined
    return float((dx * dy).sum() / denom)


def within_group_auroc(proxy_P_G: torch.Tensor, truth_P_G: torch.Tensor) -> float | None:
    """AUROC of the proxy for correctness over the pairs (correct, wrong) of the same group: the
    share of such pairs whose correct completion has the higher proxy reward (a tie counts 1/2),
    pooled over the groups (each group's pairs weigh equally). What a group-relative advantage
    acts on: the proxy's ranking inside a group, not across prompts of different difficulty.
    proxy_P_G, truth_P_G: (P, G), truth 1 = correct. None when no group has both a correct and a
    wrong completion."""
    right = truth_P_G > 0.5
    # (P, G, G): [p, i, j] = proxy_i vs proxy_j for i correct and j wrong in group p
    pair = right.unsqueeze(2) & ~right.unsqueeze(1)
    if not bool(pair.any()):
        return None
    diff = proxy_P_G.unsqueeze(2) - proxy_P_G.unsqueeze(1)
    score = (diff > 0).double() + 0.5 * (diff == 0).double()
    return float(score[pair].mean())


def _reward_accuracy(proxy: torch.Tensor, truth: torch.Tensor, binary: bool | None) -> float:
    if binary is None:
        binary = bool(((proxy == 0) | (proxy == 1)).all())
    if binary:
        return float((proxy == truth).double().mean())
    best_G = proxy.argmax(dim=-1, keepdim=True)  # first maximum on ties
    return float((truth.gather(-1, best_G) > 0.5).double().mean())


def proxy_diagnostics(
    proxy_P_G: torch.Tensor,
    truth_P_G: torch.Tensor,
    majority_answers: Sequence[str | None] | None = None,
    gold_answers: Sequence[str] | None = None,
    equal: Callable[[str, str], bool] | None = None,
    binary: bool | None = None,
) -> dict[str, float | None]:
    """How well a proxy reward tracks the ground truth, for one training batch.

    proxy_P_G, truth_P_G: (P, G); truth is the verifier's reward, 1 = correct.
    Returns the metrics.jsonl keys:

    - ``gt_accuracy``: mean ground-truth reward.
    - ``reward_accuracy``: binary proxies (all values 0/1, or ``binary=True``): share
      of rollouts whose proxy reward equals their ground-truth reward; continuous
      proxies: share of groups whose highest-proxy completion is correct (truth > 0.5).
    - ``label_accuracy``: over groups with a majority answer (not None), share whose
      majority is equivalent to the gold answer under ``equal(majority, gold)`` (the task's
      equivalence, :func:`rlvr.tasks.base.task_equivalence`, e.g. math-verify so a majority
      "1/2" matches gold "0.5"; default: stripped strings equal); None without answers or
      when no group has a majority.
    - ``proxy_truth_corr``: Pearson correlation over the B rollouts; None when either
      side is constant (or fewer than two finite pairs).
    - ``proxy_truth_auroc``: :func:`within_group_auroc`, the proxy's AUROC for correctness inside
      the groups; None when no group has both a correct and a wrong completion.
    """
    if proxy_P_G.shape != truth_P_G.shape or proxy_P_G.dim() != 2:
        raise ValueError(f"proxy {tuple(proxy_P_G.shape)}, truth {tuple(truth_P_G.shape)}: need equal (P, G)")
    proxy, truth = proxy_P_G.detach().double().cpu(), truth_P_G.detach().double().cpu()  # one sync
    out: dict[str, float | None] = {
        "gt_accuracy": float(truth.mean()),
        "reward_accuracy": _reward_accuracy(proxy, truth, binary),
        "label_accuracy": None,
        "proxy_truth_corr": _pearson(proxy, truth),
        "proxy_truth_auroc": within_group_auroc(proxy, truth),
    }
    if majority_answers is not None and gold_answers is not None:
        if len(majority_answers) != len(gold_answers):
            raise ValueError(f"{len(majority_answers)} majority answers but {len(gold_answers)} gold answers")
        same = equal or (lambda a, b: a.strip() == b.strip())
        hits = [same(m, g) for m, g in zip(majority_answers, gold_answers) if m is not None]
        out["label_accuracy"] = sum(hits) / len(hits) if hits else None
    return out


def repeated_ngram_share(text: str, n: int = 3, unit: str = "word") -> float:
    """Share of the n-grams of ``text`` that repeat an earlier n-gram: 1 - distinct / total.

    ``unit`` = "word" (whitespace tokens) or "char" (for character-level tasks). 0.0
    for a text with fewer than n units; close to 1 for a loop ("a b a b a b ...").
    """
    if unit not in ("word", "char"):
        raise ValueError(f"unit={unit!r}; use 'word' or 'char'")
    units = text.split() if unit == "word" else list(text)
    grams = [tuple(units[i : i + n]) for i in range(len(units) - n + 1)]
    if not grams:
        return 0.0
    return 1.0 - len(set(grams)) / len(grams)


def failure_signals(
    lengths_B: torch.Tensor | Sequence[int], texts_B: Sequence[str], n: int = 3, unit: str = "word"
) -> dict[str, float]:
    """Length-collapse and repetition detectors for one batch.

    Returns ``mean_length`` (tokens), ``min_length``, ``repetition`` (mean
    :func:`repeated_ngram_share` over texts) and ``repetition_max``. Watch
    ``mean_length`` falling under a probability reward and ``repetition`` rising
    under entropy rewards.
    """
    lengths = torch.as_tensor(lengths_B, dtype=torch.float64).flatten().cpu()
    if lengths.numel() != len(texts_B):
        raise ValueError(f"{lengths.numel()} lengths but {len(texts_B)} texts")
    reps = [repeated_ngram_share(t, n, unit) for t in texts_B]
    empty = lengths.numel() == 0
    return {
        "mean_length": 0.0 if empty else float(lengths.mean()),
        "min_length": 0.0 if empty else float(lengths.min()),
        "repetition": sum(reps) / len(reps) if reps else 0.0,
        "repetition_max": max(reps) if reps else 0.0,
    }
