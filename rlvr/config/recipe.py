"""The RL recipe: the ``sampling``, ``loss``, ``algo`` and ``optim`` sections."""

from __future__ import annotations

from dataclasses import dataclass

from rlvr.config.checks import (
    FRACTION,
    NON_NEGATIVE,
    OPEN_UNIT,
    POSITIVE,
    RANGES,
    UNIT,
    UNIT_HALF_OPEN,
    at_least,
    check,
    check_section_ranges,
)


@dataclass(frozen=True)
class SamplingConfig:
    temperature: float = 1.0
    """Sampling temperature (0 = greedy)."""
    top_p: float = 1.0
    """Nucleus sampling mass."""
    top_k: int = 0
    """Keep only the k most likely tokens (0 = off)."""
    max_new_tokens: int = 48
    """Completion budget in tokens."""
    stop: tuple[str, ...] = ()
    """Stop strings (the completion ends after the first one)."""
    interruption_budget: int = 0
    """Forced length interruption (ScaleRL): reasoning budget in tokens (0 = off)."""
    interruption_text: str = "\nA:"
    """Text appended when the budget is spent; its tokens are masked out of the loss."""
    interruption_extra: int = 8
    """Extra tokens allowed for the answer after the interruption."""
    engine: str = "native"
    """native (rlvr's KV-cache sampler, any device) | vllm (GPU, HF models, `pip install 'rlvr[vllm]'`)."""
    vllm_gpu_memory: float = 0.3
    """vLLM engine: share of the GPU's memory it may take (the trainer shares the GPU)."""
    max_turns: int = 4
    """Tool tasks: policy turns per episode (an episode is also bounded by max_new_tokens, which counts
    the policy's and the environment's tokens together)."""
    max_turn_tokens: int = 0
    """Tool tasks: tokens of one policy turn (0 = max_new_tokens)."""
    tool_timeout_s: float = 5.0
    """Tool tasks: seconds one tool call may run; a call past it is answered ``error: timed out``."""
    max_observation_chars: int = 256
    """Tool tasks: longer tool outputs are cut to this many characters (``...[N more chars]``)."""

    def __post_init__(self):
        check_section_ranges(self, "sampling")
        check(self.engine in ("native", "vllm"), "sampling.engine", "use native or vllm")


RANGES["sampling"] = {
    "temperature": NON_NEGATIVE, "top_p": FRACTION, "top_k": NON_NEGATIVE, "max_new_tokens": at_least(1),
    "interruption_budget": NON_NEGATIVE, "interruption_extra": NON_NEGATIVE, "vllm_gpu_memory": OPEN_UNIT,
    "max_turns": at_least(1), "max_turn_tokens": NON_NEGATIVE, "tool_timeout_s": POSITIVE,
    "max_observation_chars": at_least(1),
}


AGGREGATIONS = ("token_mean", "seq_mean_token_mean", "prompt_mean", "constant", "wapo")
"""Loss aggregations (:func:`rlvr.algo.losses.token_weights`)."""
STD_NORMS = ("group", "batch", "none")
"""Advantage std normalisations (:func:`rlvr.algo.advantages.group_advantages`)."""
KL_ESTIMATORS = ("k1", "k2", "k3")
"""Per-token estimators of KL(pi || pi_ref) on tokens sampled from pi (:func:`rlvr.algo.losses.kl_penalty`),
with d = ref_logp - logp: k1 = -d (unbiased, high variance, negative on some tokens), k2 = d^2 / 2
(biased, low variance, >= 0), k3 = exp(d) - d - 1 (unbiased, low variance, >= 0; the default)."""
IS_CORRECTIONS = ("none", "token_tis", "seq_tis", "token_mis", "seq_mis")
"""The values of ``loss.is_correction`` (train/inference mismatch correction, :mod:`rlvr.algo.mismatch`)."""


@dataclass(frozen=True)
class LossConfig:
    """The policy loss: the ONE settings class of the YAML ``loss:`` section and of the loss functions
    (:mod:`rlvr.algo.losses`). Optional fields left None (and "" strings) mean "the variant's own";
    :func:`rlvr.algo.losses.resolve_loss` fills them (global default < variant default < explicit value)."""

    name: str = "cispo"
    """Loss variant from `rlvr.algo.losses.LOSSES`: grpo dr_grpo dapo gspo cispo wapo."""
    aggregation: str = ""
    """token_mean | seq_mean_token_mean | prompt_mean | constant | wapo; "" = the variant's own."""
    std_norm: str = ""
    """Advantage std normalisation: group | batch | none; "" = the variant's own."""
    eps_low: float | None = None
    """Lower clip: ratio floor 1 - eps_low (grpo, dr_grpo, dapo, gspo); None = the variant's default
    (0.2; gspo 3e-4)."""
    eps_high: float | None = None
    """Upper clip: ratio ceiling 1 + eps_high; None = the variant's default (0.2; dapo 0.28, gspo 4e-4)."""
    eps_max: float | None = None
    """CISPO: absolute cap on the stop-gradient importance weight rho (not 1 + eps); None = the
    variant's default (4)."""
    cispo_eps_low: float | None = None
    """CISPO: optional floor 1 - cispo_eps_low on the importance weight (MiniMax-M1, arXiv 2506.13585);
    None = no floor."""
    wapo_eps: float | None = None
    """WAPO: ratio capped at 1 + wapo_eps (zero gradient above it); None = the default (9, cap 10)."""
    gspo_token: bool = False
    """GSPO: use the GSPO-token form s_it = sg(s_i) pi / sg(pi) (same value, per-token gradient)."""
    kl_coef: float = 0.0
    """KL penalty to a frozen reference (0 = off, no reference model loaded)."""
    kl_estimator: str = "k3"
    """KL estimator: k1 | k2 | k3, each a function of d = ref_logp - logp per token (k1 = -d,
    k2 = d^2 / 2, k3 = exp(d) - d - 1; see ``KL_ESTIMATORS``)."""
    entropy_coef: float = 0.0
    """Entropy bonus coefficient (0 = off)."""
    is_correction: str = "none"
    """Train/inference mismatch correction (docs/methods/mismatch.md): none | token_tis | seq_tis |
    token_mis | seq_mis. Not none: the trainer recomputes the batch's log-probs before the update, the
    PPO ratio is taken against them, and each token's loss is weighted by the truncated (tis) or masked
    (mis) ratio train / behaviour at token or sequence level."""
    is_cap: float = 2.0
    """Cap C (>= 1) of the mismatch ratio: tis weights are min(ratio, C), mis weights are zero past C.
    The mismatch metrics count tokens past it whatever ``is_correction`` is."""

    def __post_init__(self):
        check_section_ranges(self, "loss")
        check(self.is_correction in IS_CORRECTIONS, "loss.is_correction",
              f"unknown {self.is_correction!r}; use {' | '.join(IS_CORRECTIONS)}")
        check(self.kl_estimator in KL_ESTIMATORS, "loss.kl_estimator", "use k1, k2 or k3")
        check(self.std_norm in ("", *STD_NORMS), "loss.std_norm",
              f"unknown {self.std_norm!r}; use {' | '.join(STD_NORMS)} or \"\" (the variant's own)")
        check(self.aggregation in ("", *AGGREGATIONS), "loss.aggregation",
              f"unknown {self.aggregation!r}; use {' | '.join(AGGREGATIONS)} or \"\" (the variant's own)")


RANGES["loss"] = {
    "eps_low": FRACTION, "eps_high": POSITIVE, "eps_max": POSITIVE, "cispo_eps_low": FRACTION,
    "wapo_eps": POSITIVE, "kl_coef": NON_NEGATIVE, "entropy_coef": NON_NEGATIVE, "is_cap": at_least(1),
}


@dataclass(frozen=True)
class AlgoConfig:
    prompts_per_step: int = 16
    """P: prompts per RL step."""
    group_size: int = 8
    """G: completions per prompt."""
    ppo_epochs: int = 1
    """Passes over each batch (ratios leave 1 after the first update)."""
    minibatches: int = 2
    """Optimiser steps per epoch (the batch is split by prompt groups)."""
    micro_batch_size: int = 0
    """Rows per forward/backward (gradient accumulation; 0 = whole mini-batch)."""
    zero_var_filter: bool = True
    """Drop groups whose rewards are all equal from the loss and its normaliser."""
    dynamic_sampling: bool = False
    """DAPO dynamic sampling: keep only groups with mixed verifier outcomes (some completions right, some
    wrong; :func:`rlvr.algo.advantages.mixed_outcome_groups`), sampling fresh prompts until P such groups
    are collected (after ``dynamic_max_rounds`` rounds it trains on those it has). The test is on
    correctness, not on the shaped reward. Async pipeline: the workers drop the other groups; not with
    data parallel."""
    dynamic_max_rounds: int = 4
    """DAPO dynamic sampling: most sampling rounds per step before accepting a smaller batch."""
    npr_threshold: float = 0.0
    """No-Positive-Resampling: retire prompts whose historical pass rate reaches this (0 = off)."""
    overlong_cache: int = 0
    """DAPO overlong shaping soft window L_cache in tokens (0 = off)."""
    mask_truncated: bool = False
    """Mask completions that hit the length limit out of the loss."""

    def __post_init__(self):
        check_section_ranges(self, "algo")
        check(self.minibatches <= self.prompts_per_step, "algo.minibatches",
              f"must be between 1 and algo.prompts_per_step={self.prompts_per_step} (got {self.minibatches})")


RANGES["algo"] = {
    "prompts_per_step": at_least(1), "group_size": at_least(2), "ppo_epochs": at_least(1),
    "minibatches": at_least(1), "micro_batch_size": NON_NEGATIVE, "dynamic_max_rounds": at_least(1),
    "npr_threshold": UNIT, "overlong_cache": NON_NEGATIVE,
}


@dataclass(frozen=True)
class OptimConfig:
    lr: float = 1e-4
    """AdamW learning rate."""
    betas: tuple[float, float] = (0.9, 0.99)
    """AdamW betas."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    grad_clip: float = 1.0
    """Clip the global gradient norm (0 = off)."""
    warmup_steps: int = 5
    """Linear warm-up steps."""
    schedule: str = "constant"
    """LR after warm-up: constant | cosine."""

    def __post_init__(self):
        check_section_ranges(self, "optim")
        check(self.schedule in ("constant", "cosine"), "optim.schedule", "use constant or cosine")


RANGES["optim"] = {
    "lr": POSITIVE, "betas": UNIT_HALF_OPEN, "weight_decay": NON_NEGATIVE, "grad_clip": NON_NEGATIVE,
    "warmup_steps": NON_NEGATIVE,
}

