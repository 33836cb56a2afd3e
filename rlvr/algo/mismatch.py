"""Train/inference mismatch: its measurement and its importance-sampling correction.

The sampler (vLLM, a bf16 engine, a stale worker) and the trainer compute different log-probs
for the same tokens. With d_t = logp_train_t - logp_behaviour_t on loss tokens:

- ``token_tis``: w_t = min(exp(d_t), C)                (truncated IS, token level)
- ``seq_tis``:   w_i = min(exp(sum_t d_t), C)          (truncated IS, sequence level)
- ``token_mis``: w_t = exp(d_t) * 1[exp(d_t) <= C]     (masked IS, token level)
- ``seq_mis``:   w_i = exp(sum_t d_t) * 1[... <= C]    (masked IS, sequence level)
- ``none``:      w = 1

The weights carry no gradient; they multiply each token's policy loss (a sequence weight every
token of its row). Everything is computed in log space, so a long sequence's product of ratios
cannot overflow. Formulas and papers: docs/methods/mismatch.md. :func:`correct` is the one call the
trainer makes: the weights, the tokens kept, and the statistics.

Shapes: B rows, T completion tokens; ``mask`` (B, T), nonzero = loss token.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from rlvr.config import IS_CORRECTIONS


@dataclass(frozen=True)
class Correction:
    """A batch's mismatch correction. weights: (B, T) detached IS weights (1 on padding); keep: (B, T)
    bool, the loss mask without the tokens a masked mode (token_mis, seq_mis) rejects; sums: the
    :func:`mismatch_stats` sums over the batch's loss tokens (:func:`summarise` -> metrics)."""

    weights: Tensor
    keep: Tensor
    sums: dict


def correct(train_logp: Tensor, behaviour_logp: Tensor, mask: Tensor, mode: str, cap: float) -> Correction:
    """The correction of ``mode`` with cap C for one batch: :func:`is_weights`, the mask without the
    :func:`rejected` tokens (so that they leave the aggregation's normaliser too) and
    :func:`mismatch_stats`, all judged against the loss mask as given. train_logp, behaviour_logp,
    mask: (B, T)."""
    weights = is_weights(train_logp, behaviour_logp, mask, mode, cap)
    sums = mismatch_stats(train_logp, behaviour_logp, mask, mode, cap)
    keep = (mask != 0) & ~rejected(train_logp, behaviour_logp, mask, mode, cap)
    return Correction(weights, keep, sums)


def log_mismatch(train_logp: Tensor, behaviour_logp: Tensor, mask: Tensor) -> Tensor:
    """(B, T) d = train_logp - behaviour_logp on loss tokens, exactly 0 on padding (no NaN leaks)."""
    if train_logp.shape != behaviour_logp.shape or train_logp.shape != mask.shape:
        raise ValueError(f"train_logp {tuple(train_logp.shape)}, behaviour_logp {tuple(behaviour_logp.shape)} "
                         f"and mask {tuple(mask.shape)} must have the same (B, T) shape")
    d = train_logp.detach() - behaviour_logp.detach().to(train_logp.dtype)
    return torch.where(mask != 0, d, torch.zeros_like(d))


def _level_log_ratio(d: Tensor, mask: Tensor, mode: str) -> Tensor:
    """(B, T) the log-ratio each token is judged by: its own (token modes, none) or its row's sum."""
    if mode.startswith("seq"):
        return torch.where(mask != 0, d.sum(-1, keepdim=True).expand_as(d), torch.zeros_like(d))
    return d


def is_weights(train_logp: Tensor, behaviour_logp: Tensor, mask: Tensor, mode: str, cap: float) -> Tensor:
    """(B, T) detached correction weights w for ``mode`` (see the module docstring); 1 on padding.

    cap: C >= 1. ``none`` gives all ones."""
    if mode not in IS_CORRECTIONS:
        raise ValueError(f"unknown is_correction {mode!r}; use one of {', '.join(IS_CORRECTIONS)}")
    if not cap >= 1.0:
        raise ValueError(f"is_cap must be >= 1 (got {cap})")
    d = log_mismatch(train_logp, behaviour_logp, mask)
    ones = torch.ones_like(d)
    if mode == "none":
        return ones
    log_c = math.log(cap)
    lr = _level_log_ratio(d, mask, mode)
    if mode.endswith("tis"):
        w = torch.exp(torch.clamp(lr, max=log_c))
    else:
        w = torch.where(lr <= log_c, torch.exp(torch.clamp(lr, max=log_c)), torch.zeros_like(lr))
    return torch.where(mask != 0, w, ones)


def rejected(train_logp: Tensor, behaviour_logp: Tensor, mask: Tensor, mode: str, cap: float) -> Tensor:
    """(B, T) bool: the loss tokens a masked-IS mode (token_mis, seq_mis) drops, i.e. whose ratio at
    the mode's level exceeds ``cap``; all False for the other modes. The step removes them from the
    loss mask before the aggregation weights are computed, so that they leave the normaliser too
    (a zero weight alone would still count them in a token mean)."""
    if not mode.endswith("mis"):
        return torch.zeros_like(mask, dtype=torch.bool)
    d = log_mismatch(train_logp, behaviour_logp, mask)
    return (_level_log_ratio(d, mask, mode) > math.log(cap)) & (mask != 0)


def mismatch_stats(train_logp: Tensor, behaviour_logp: Tensor, mask: Tensor, mode: str, cap: float) -> dict:
    """Sums over loss tokens (additive over micro-batches / ranks, except ``max``):
    ``abs_sum`` sum |d_t|, ``max`` max |d_t|, ``past_cap`` tokens whose ratio (token level for
    none / token_*, their row's for seq_*) exceeds ``cap``, ``weight_sum`` sum of the correction
    weights, ``n`` loss tokens. Floats; :func:`summarise` turns them into the logged metrics."""
    m = mask != 0
    d = log_mismatch(train_logp, behaviour_logp, mask)
    past = (_level_log_ratio(d, mask, mode) > math.log(cap)) & m
    w = is_weights(train_logp, behaviour_logp, mask, mode, cap)
    return {
        "abs_sum": float(d.abs().sum()),
        "max": float(d.abs().max()) if d.numel() else 0.0,
        "past_cap": float(past.sum()),
        "weight_sum": float(torch.where(m, w, torch.zeros_like(w)).sum()),
        "n": float(m.sum()),
    }


def merge(a: dict, b: dict) -> dict:
    """Combine two :func:`mismatch_stats` sums (max of ``max``, sum of the rest); ``a`` may be empty."""
    if not a:
        return dict(b)
    return {k: max(a[k], b[k]) if k == "max" else a[k] + b[k] for k in b}


def summarise(sums: dict) -> dict[str, float]:
    """The metrics line's ``mismatch_*`` keys from :func:`mismatch_stats` sums: the mean and max of
    |logp_train - logp_behaviour| over loss tokens, the share of tokens past the cap, the mean weight."""
    n = max(sums.get("n", 0.0), 1.0)
    return {
        "mismatch_logp_diff_mean": sums.get("abs_sum", 0.0) / n,
        "mismatch_logp_diff_max": sums.get("max", 0.0),
        "mismatch_frac_past_cap": sums.get("past_cap", 0.0) / n,
        "mismatch_is_weight_mean": sums.get("weight_sum", 0.0) / n if sums.get("n") else 1.0,
    }
