"""The per-step metrics the RL step (:mod:`rlvr.train.step`) writes beside its loop: rollout
diagnostics of everything sampled, staleness of the samples, and the loud warnings for the
failures peers suffer silently.

Shapes: B rows, T completion tokens; P groups of G samples.
"""

from __future__ import annotations

import torch

from rlvr.algo.advantages import zero_variance_groups
from rlvr.log import warn
from rlvr.train.state import TrainState
from rlvr.types import ScoredBatch


def rollout_metrics(batch: ScoredBatch) -> dict:
    """Diagnostics of the sampled batch (all rounds of dynamic sampling). ``zero_var_frac``: the
    share of ALL sampled groups whose rewards are all equal, as TRL's ``frac_reward_zero_std`` (over
    every generated group); the trained batch's share is ``zero_var_frac_trained``
    (:func:`rlvr.train.step.train_on`)."""
    rb, verdicts = batch.rollouts, batch.verdicts
    n = max(1, len(verdicts))
    policy = rb.policy_mask  # environment tokens (tool outputs) are no sample of the policy
    ent = (rb.entropy * policy).sum() / policy.sum().clamp(min=1)
    status = {s: sum(v.status == s for v in verdicts) / n for s in ("no_answer", "malformed", "wrong", "right")}
    return {
        "reward": float(batch.reward_B.mean()),
        "pass_rate": status["right"],
        "no_answer_rate": status["no_answer"],
        "malformed_rate": status["malformed"],
        "entropy": float(ent),
        "response_len": float(rb.policy_lengths.float().mean()),
        "truncation_rate": sum(r == "length" for r in rb.finish_reason) / n,
        "interrupted_rate": sum(r == "interrupted" for r in rb.finish_reason) / n,
        "zero_var_frac": float(zero_variance_groups(batch.reward_B.view(-1, batch.group_size)).float().mean()),
        **episode_metrics(batch),
    }


def episode_metrics(batch: ScoredBatch) -> dict:
    """Tool tasks' episode diagnostics (no keys for a single-turn batch): ``turns``, ``tool_calls``
    and ``env_tokens`` per episode, ``failed_call_share`` (failed calls over calls), and the pass
    rate of the episodes with (``pass_rate_with_call``) and without (``pass_rate_without_call``) a
    tool call (NaN when no episode is in that group)."""
    episodes = batch.rollouts.episodes
    if episodes is None:
        return {}
    n = max(1, len(episodes))
    calls = sum(e.tool_calls for e in episodes)
    correct = [v.correct for v in batch.verdicts]
    with_call = [c for c, e in zip(correct, episodes) if e.tool_calls]
    without = [c for c, e in zip(correct, episodes) if not e.tool_calls]
    return {
        "turns": sum(e.turns for e in episodes) / n,
        "tool_calls": calls / n,
        "failed_call_share": sum(e.failed_calls for e in episodes) / calls if calls else 0.0,
        "env_tokens": sum(e.env_tokens for e in episodes) / n,
        "pass_rate_with_call": sum(with_call) / len(with_call) if with_call else float("nan"),
        "pass_rate_without_call": sum(without) / len(without) if without else float("nan"),
    }


def oldest_versions(versions_B_T: torch.Tensor, mask_B_T: torch.Tensor) -> torch.Tensor:
    """(B,) the OLDEST policy version among each row's real tokens."""
    return versions_B_T.masked_fill(~mask_B_T, torch.iinfo(versions_B_T.dtype).max).min(-1).values


def staleness(version: int, versions_B_T: torch.Tensor, mask_B_T: torch.Tensor) -> torch.Tensor:
    """(B,) trainer version minus the oldest policy version among each row's real tokens."""
    return version - oldest_versions(versions_B_T, mask_B_T)


def lag_metrics(step: int, batch: ScoredBatch) -> dict:
    """``lag_max`` / ``lag_mean``: the staleness of the batch's samples at trainer version ``step``."""
    lag_B = staleness(step, batch.rollouts.versions, batch.rollouts.completion_mask)
    return {"lag_max": int(lag_B.max()) if lag_B.numel() else 0,
            "lag_mean": float(lag_B.float().mean()) if lag_B.numel() else 0.0}


def warn_silent_failures(st: TrainState, metrics: dict) -> None:
    """The failures peers suffer silently: loud here, and counted; ``metrics["warnings"]`` = the counters."""
    if metrics["truncation_rate"] >= 1.0:
        st.count("all_truncated_steps")
        warn(f"step {st.step}: every completion was truncated at {st.params.max_new_tokens} tokens; "
             "raise sampling.max_new_tokens")
    elif metrics["truncation_rate"] > 0.15:
        st.count("high_truncation_steps")
    if metrics["zero_var_frac"] >= 1.0:
        st.count("all_zero_variance_steps")
        warn(f"step {st.step}: every sampled group had identical rewards (zero-variance fraction 1): "
             "no learning signal")
    if metrics["no_answer_rate"] + metrics["malformed_rate"] >= 1.0:
        st.count("no_parseable_answer_steps")
        warn(f"step {st.step}: no completion produced a parseable answer")
    metrics["warnings"] = dict(st.counters)
