"""Metric names: rlvr's keys (``metrics.jsonl``, the in-memory metrics line) and the namespaced
names the sinks (TensorBoard, W&B, MLflow) receive, which follow TRL's GRPOTrainer where TRL logs the
same quantity (trl/trainer/grpo_trainer.py ``self._metrics``) and an ``rlvr/`` family otherwise.
The table, with verl's name for each, is docs/coming_from_trl_verl.md.

:func:`flat` maps either spelling back to rlvr's key, so readers of run directories (``rlvr report``,
``rlvr fit``, ``rlvr collapse``) accept files written with the old flat names and files written with
the namespaced ones.
"""

from __future__ import annotations

NAMESPACED: dict[str, str] = {
    # rollouts (TRL's names)
    "reward": "reward",
    "reward_std": "reward_std",
    "zero_var_frac": "frac_reward_zero_std",
    "response_len": "completions/mean_length",
    "truncation_rate": "completions/clipped_ratio",
    "entropy": "entropy",
    # policy update (TRL's names)
    "policy_loss": "policy_loss",
    "loss": "loss",
    "kl_ref": "kl",
    "clip_frac_low": "clip_ratio/low_mean",
    "clip_frac_high": "clip_ratio/high_mean",
    "grad_norm": "grad_norm",
    "lr": "learning_rate",
    # train/inference mismatch (TRL's names where it has them)
    "mismatch_logp_diff_mean": "sampling/sampling_logp_difference/mean",
    "mismatch_logp_diff_max": "sampling/sampling_logp_difference/max",
    "mismatch_is_weight_mean": "sampling/importance_sampling_ratio/mean",
    "mismatch_frac_past_cap": "sampling/frac_past_cap",
    # rlvr's own
    "pass_rate": "rlvr/pass_rate",
    "heldout_pass_rate": "eval/pass_rate",
    "no_answer_rate": "rlvr/no_answer_rate",
    "malformed_rate": "rlvr/malformed_rate",
    "interrupted_rate": "rlvr/interrupted_rate",
    "approx_kl": "rlvr/approx_kl",
    "ratio_mean": "rlvr/ratio_mean",
    "trunc_frac": "rlvr/trunc_frac",
    "samples": "rlvr/samples",
    "flops": "rlvr/flops",
    "wall_s": "rlvr/wall_s",
    "lag_max": "rlvr/lag_max",
    "lag_mean": "rlvr/lag_mean",
    "gen_s": "timing/gen_s",
    "train_s": "timing/train_s",
}
"""rlvr key -> the name sinks log it under. Keys not listed go to the sinks as ``rlvr/<key>``."""

LEGACY: dict[str, str] = {
    "num_tokens": "tokens",  # rlvr's tokens were sent as TRL's num_tokens, a different count (prompt + completion
    # tokens seen; rlvr's: generated tokens plus trained tokens x ppo_epochs): now rlvr/tokens, old logs still read
}
"""Sink names rlvr once used, still read back to rlvr's key."""

_BACK = {**LEGACY, **{v: k for k, v in NAMESPACED.items()}}


def namespaced(key: str) -> str:
    """The sink name of rlvr key ``key`` (TRL's where TRL has the quantity, else ``rlvr/<key>``)."""
    if key in NAMESPACED:
        return NAMESPACED[key]
    return key if "/" in key else f"rlvr/{key}"


def flat_key(key: str) -> str:
    """rlvr's key for ``key`` written either way (a namespaced name or the flat key itself)."""
    if key in _BACK:
        return _BACK[key]
    return key[len("rlvr/"):] if key.startswith("rlvr/") else key


def flat(row: dict) -> dict:
    """``row`` with every key in rlvr's flat spelling (a flat key wins over a namespaced duplicate)."""
    out = {flat_key(k): v for k, v in row.items() if flat_key(k) not in row}
    out.update({k: v for k, v in row.items() if flat_key(k) == k})
    return out
