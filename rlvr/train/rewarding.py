"""Rewards of one batch: the task's verifier, an intrinsic reward, or a weighted mix.

Ground truth (the verifier) is always computed and logged; with an intrinsic
reward it is never fed to the loss, only compared with the proxy.
"""

from __future__ import annotations

import torch

from rlvr.config import RewardConfig
from rlvr.types import RolloutBatch, Verdict


def intrinsic_reward(name: str, rb: RolloutBatch, answers_P_G: list[list[str | None]],
                     vote_threshold: float = 0.0) -> torch.Tensor:
    """(B,) intrinsic reward ``name`` (on the CPU, like the verifier's) from what the sampler returned
    (no extra forward pass). ``vote_threshold``: majority vote's minimum label share (TTRL)."""
    from rlvr.rewards.intrinsic import INTRINSIC_REWARDS, REWARD_INPUTS, majority_vote_reward

    if name == "majority_vote":
        return majority_vote_reward(answers_P_G, min_share=vote_threshold)[0].reshape(-1)
    field = REWARD_INPUTS[name]
    src = getattr(rb, field)
    if src is None:
        raise ValueError(f"reward {name!r} needs RolloutBatch.{field}; sample with self_certainty=True")
    return INTRINSIC_REWARDS[name](src, rb.loss_mask).float().cpu()


def compute_rewards(cfg: RewardConfig, rb: RolloutBatch, verdicts: list[Verdict], G: int,
                    gold_answers: list[str]) -> tuple[torch.Tensor, dict]:
    """-> (reward_B used by the loss, metrics). metrics holds gt_accuracy and, for intrinsic
    rewards, reward_accuracy / label_accuracy / proxy_truth_corr."""
    truth = torch.tensor([v.reward for v in verdicts], dtype=torch.float32)
    if cfg.kind == "verifier":
        return truth, {}
    from rlvr.rewards.intrinsic import proxy_diagnostics

    answers = [v.answer if v.status in ("right", "wrong") else None for v in verdicts]
    answers_P_G = [answers[i : i + G] for i in range(0, len(answers), G)]
    if cfg.kind == "mix":
        reward = torch.zeros_like(truth)
        for name, w in cfg.weights.items():
            part = truth if name == "verifier" else intrinsic_reward(name, rb, answers_P_G, cfg.vote_threshold)
            reward = reward + w * part
    else:
        reward = intrinsic_reward(cfg.kind, rb, answers_P_G, cfg.vote_threshold)
    majority = None
    if cfg.kind == "majority_vote":
        from rlvr.rewards.intrinsic import majority_vote_reward

        majority = majority_vote_reward(answers_P_G)[1]
    diag = proxy_diagnostics(reward.view(-1, G), truth.view(-1, G), majority,
                             None if majority is None else gold_answers)
    return reward, diag

