"""Advantages from group rewards (docs/methods/advantages.md) and DAPO overlong shaping.

Shapes: P prompts, G samples per prompt, B = P*G completions. Rewards arrive as
``reward_P_G``; the trainer flattens the result to ``adv_B`` (row p*G + g) and
broadcasts it to every token of the completion.
"""

from __future__ import annotations

import torch
from torch import Tensor

from rlvr.config import STD_NORMS

__all__ = ["STD_EPS", "STD_NORMS", "group_advantages", "mixed_outcome_groups", "overlong_penalty",
           "zero_variance_groups"]

STD_EPS = 1e-6


def zero_variance_groups(reward_P_G: Tensor) -> Tensor:
    """(P,) bool: True where all G rewards of the group are equal (so every A_i = 0)."""
    _check_rewards(reward_P_G)
    return (reward_P_G == reward_P_G[:, :1]).all(dim=-1)


def mixed_outcome_groups(correct_P_G: Tensor) -> Tensor:
    """(P,) bool: DAPO dynamic sampling's filter (arXiv 2503.14476, eq. 11), 0 < accuracy < 1.

    correct_P_G: (P, G) bool (or 0/1) verifier outcomes. A group that is all right or all wrong
    carries no signal and is resampled; the test is on accuracy, not on the shaped reward (an
    overlong penalty can give an all-wrong group unequal rewards).
    """
    if correct_P_G.dim() != 2 or correct_P_G.shape[1] == 0:
        raise ValueError(f"correct_P_G must have shape (P, G), got {tuple(correct_P_G.shape)}")
    n_right = (correct_P_G != 0).sum(-1)
    return (n_right > 0) & (n_right < correct_P_G.shape[1])


def group_advantages(reward_P_G: Tensor, std_norm: str = "group") -> Tensor:
    """Group-centred advantages A_i = r_i - mean_group(r), optionally std-normalised.

    reward_P_G: (P, G) rewards. Returns adv_P_G (P, G) in the rewards' float dtype.

    std_norm:
      - ``"group"`` (GRPO, arXiv 2402.03300): divide by the population std of the
        group + 1e-6;
      - ``"batch"`` (ScaleRL, arXiv 2510.13786): centre within the group, then divide
        by the population std of all P*G centred advantages + 1e-6;
      - ``"none"`` (Dr.GRPO arXiv 2503.20783, WAPO): centred only.

    Zero-variance groups give exactly 0 (never NaN, even when the float mean of
    equal rewards is not exactly representable).
    """
    _check_rewards(reward_P_G)
    if std_norm not in STD_NORMS:
        raise ValueError(f"unknown std_norm {std_norm!r}; use one of {', '.join(STD_NORMS)}")
    reward = reward_P_G if reward_P_G.is_floating_point() else reward_P_G.float()
    centred = reward - reward.mean(dim=-1, keepdim=True)
    centred = centred.masked_fill(zero_variance_groups(reward)[:, None], 0.0)
    if std_norm == "group":
        return centred / (reward.std(dim=-1, correction=0, keepdim=True) + STD_EPS)
    if std_norm == "batch":
        return centred / (centred.std(correction=0) + STD_EPS)
    return centred


def overlong_penalty(lengths_B: Tensor, max_len: int, cache_len: int) -> Tensor:
    """DAPO soft overlong reward shaping (arXiv 2503.14476), added to the reward.

    lengths_B: (B,) completion lengths L. With L_max = max_len and L_cache = cache_len:
    0 if L <= L_max - L_cache; ((L_max - L_cache) - L) / L_cache if
    L_max - L_cache < L <= L_max; -1 if L > L_max. Returns (B,) float32 (or the
    lengths' float dtype).
    """
    if max_len <= 0 or not 0 <= cache_len <= max_len:
        raise ValueError(
            f"overlong_penalty needs max_len > 0 and 0 <= cache_len <= max_len, got "
            f"max_len={max_len}, cache_len={cache_len}; fix the overlong settings"
        )
    length = lengths_B if lengths_B.is_floating_point() else lengths_B.float()
    soft_start = max_len - cache_len
    soft = (soft_start - length) / max(cache_len, 1)
    penalty = torch.where(length <= soft_start, torch.zeros_like(length), soft)
    return torch.where(length > max_len, torch.full_like(length, -1.0), penalty)


def _check_rewards(reward_P_G: Tensor) -> None:
    if reward_P_G.dim() != 2 or reward_P_G.shape[1] == 0:
        raise ValueError(
            f"rewards must have shape (P, G) with G >= 1, got {tuple(reward_P_G.shape)}; "
            "reshape the flat rewards with .view(P, G)"
        )
