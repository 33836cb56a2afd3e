"""Typed, frozen configuration. Defaults live only here; YAML and ``key=value``
overrides are validated against these dataclasses (unknown keys, wrong types and
broken invariants fail at load time with the fix in the message).

Each field's docstring is the attribute docstring under it.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import math
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from rlvr.errors import UserError


class ConfigError(UserError):
    """A config that cannot be used; the message names the key and the fix."""


def _check(cond: bool, key: str, msg: str) -> None:
    if not cond:
        raise ConfigError(f"{key}: {msg}")


# ---------------------------------------------------------------- numeric ranges


@dataclass(frozen=True)
class Range:
    """The valid values of a numeric field: finite, and between ``low`` and ``high`` (None =
    unbounded), each bound included unless ``low_open`` / ``high_open``."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def contains(self, x: float) -> bool:
        if not math.isfinite(x):
            return False
        if self.low is not None and (x <= self.low if self.low_open else x < self.low):
            return False
        return self.high is None or (x < self.high if self.high_open else x <= self.high)

    def describe(self) -> str:
        """``>= 1``, ``> 0``, ``in [0, 1)`` or ``a finite number``."""
        if self.low is not None and self.high is not None:
            return f"in {'(' if self.low_open else '['}{self.low:g}, {self.high:g}{')' if self.high_open else ']'}"
        if self.low is not None:
            return f"{'>' if self.low_open else '>='} {self.low:g}"
        if self.high is not None:
            return f"{'<' if self.high_open else '<='} {self.high:g}"
        return "a finite number"


def at_least(x: float) -> Range:
    return Range(low=x)


def above(x: float) -> Range:
    return Range(low=x, low_open=True)


FINITE = Range()
NON_NEGATIVE = at_least(0)
POSITIVE = above(0)
UNIT = Range(0, 1)  # [0, 1]
UNIT_HALF_OPEN = Range(0, 1, high_open=True)  # [0, 1)
FRACTION = Range(0, 1, low_open=True)  # (0, 1]
OPEN_UNIT = Range(0, 1, low_open=True, high_open=True)  # (0, 1)

RANGES: dict[str, dict[str, Range]] = {}
"""Section name -> field -> valid range, for EVERY int/float field (and numeric tuple: each item)
of the config sections; checked first in each section's ``__post_init__``. A None value of an
optional field (``loss.eps_low: null``) means "the default" and is not checked."""


def _check_ranges(obj, section: str) -> None:
    """ConfigError ``section.field: must be >= 1 (got -3)`` for the first field out of its range."""
    for name, rng in RANGES[section].items():
        value = getattr(obj, name)
        items = [(f"{section}.{name}[{i}]", v) for i, v in enumerate(value)] if isinstance(value, tuple) \
            else [(f"{section}.{name}", value)]
        for key, v in items:
            if v is None:
                continue
            if not isinstance(v, int | float) or isinstance(v, bool):
                raise ConfigError(f"{key}: expected a number, got {v!r}")
            if not math.isfinite(v):
                raise ConfigError(f"{key}: must be a finite number (got {v!r})")
            if not rng.contains(v):
                raise ConfigError(f"{key}: must be {rng.describe()} (got {v!r})")


DTYPES = ("auto", "float32", "bfloat16")
"""The values of ``model.dtype``."""


@dataclass(frozen=True)
class ModelConfig:
    kind: str = "tiny"
    """Policy family: "tiny" (embedded GPT) or "hf" (any transformers causal LM)."""
    n_layer: int = 4
    """Tiny model: transformer blocks."""
    d_model: int = 128
    """Tiny model: residual width."""
    n_head: int = 4
    """Tiny model: attention heads (d_model must divide evenly)."""
    context: int = 96
    """Maximum sequence length (prompt + completion) in tokens."""
    mlp: str = "swiglu"
    """Tiny model MLP: "swiglu" or "gelu"."""
    tie_weights: bool = True
    """Tie the LM head to the token embedding."""
    fp32_logits: bool = True
    """LM head and log-softmax in float32 whatever the rest runs in (ScaleRL's FP32-logits fix)."""
    dtype: str = "auto"
    """Compute dtype: "auto", "float32" or "bfloat16" (bf16 autocast; master weights, optimiser state,
    the LM head and log-softmax (fp32_logits) stay float32). "auto" is resolved once, when the run
    starts, and the run's config.yaml records the result: on a CUDA GPU bfloat16 where
    ``torch.cuda.is_bf16_supported()``, else float32; on the CPU bfloat16 only where a measurement of
    bf16 autocast matmuls at this model's shapes is >= 1.1x faster than float32 (measured once per
    machine, cached under ``<cache>/machine/``; see ``rlvr.model.precision``)."""
    path: str = ""
    """HF model: local directory or hub name (e.g. "Qwen/Qwen2.5-0.5B-Instruct")."""
    init_from: str = ""
    """Start from this checkpoint directory; "" = the cached pretrained tiny base model."""
    gradient_checkpointing: bool = False
    """HF model: recompute activations in backward to save memory."""
    lora_r: int = 0
    """HF model: LoRA rank through peft (0 = full fine-tuning)."""
    chat_template: bool = True
    """HF model: apply the tokenizer's chat template when it has one (chat-message prompts need it)."""
    chat_template_kwargs: dict = field(default_factory=dict)
    """HF model: extra keyword arguments of ``tokenizer.apply_chat_template`` when rendering a prompt,
    e.g. ``{enable_thinking: false}`` for Qwen3 (TRL's ``chat_template_kwargs``)."""

    def __post_init__(self):
        _check_ranges(self, "model")
        _check(self.kind in ("tiny", "hf"), "model.kind", f"unknown {self.kind!r}; use tiny or hf")
        _check(self.mlp in ("swiglu", "gelu"), "model.mlp", "use swiglu or gelu")
        _check(self.dtype in DTYPES, "model.dtype", "use auto, float32 or bfloat16")
        _check(self.d_model % self.n_head == 0, "model.d_model", "must be divisible by model.n_head")
        _check((self.d_model // self.n_head) % 2 == 0, "model.n_head", "head size must be even (RoPE)")
        _check(self.kind != "hf" or bool(self.path), "model.path", "set it for model.kind=hf")
        _check(all(isinstance(k, str) and k.isidentifier() for k in self.chat_template_kwargs),
               "model.chat_template_kwargs", "keys must be names (e.g. {enable_thinking: false})")
        _check(not self.chat_template_kwargs or (self.kind == "hf" and self.chat_template),
               "model.chat_template_kwargs", "needs model.kind=hf and model.chat_template=true (the tiny model "
               "has no chat template)")

    def with_dtype(self, dtype: str) -> ModelConfig:
        """This config with ``dtype`` instead (e.g. pretraining: always "float32")."""
        return dataclasses.replace(self, dtype=dtype)


RANGES["model"] = {
    "n_layer": at_least(1), "d_model": at_least(1), "n_head": at_least(1), "context": at_least(8),
    "lora_r": NON_NEGATIVE,
}


@dataclass(frozen=True)
class TaskConfig:
    name: str = "arithmetic"
    """Task name from the task registry (`rlvr.tasks.registry`)."""
    knobs: dict = field(default_factory=dict)
    """Keyword arguments of the task's constructor (difficulty, seed, data paths)."""
    train_size: int = 0
    """Number of training problems (0 = all the task offers)."""
    heldout_size: int = 200
    """Number of held-out problems used for evaluation."""
    test_time: bool = False
    """Test-time training (TTRL): train on the first heldout_size held-out problems and evaluate on
    the same ones (set train.eval_problems to heldout_size). Use with an unsupervised reward such as
    majority_vote; the verifier reward, a mix with a verifier weight and No-Positive-Resampling would
    use the held-out labels, so they are refused (ConfigError)."""
    retention_tasks: tuple[str, ...] = ("strings",)
    """Non-target tasks evaluated for general-ability retention (greedy accuracy; each built with the
    corpus's knobs for it, ``pretrain.task_knobs``: see docs/methods/testbed.md)."""
    retention_problems: int = 200
    """Held-out problems of each retention task in ``rlvr run``'s evaluation."""

    def __post_init__(self):
        _check_ranges(self, "task")
        _check(not self.test_time or self.heldout_size >= 1, "task.heldout_size",
               "must be >= 1 with task.test_time=true (it is the training set)")


RANGES["task"] = {"train_size": NON_NEGATIVE, "heldout_size": NON_NEGATIVE, "retention_problems": at_least(1)}


@dataclass(frozen=True)
class PretrainConfig:
    tokens: int = 1_500_000
    """Token budget of base-model pretraining."""
    batch_size: int = 48
    """Sequences per optimiser step."""
    seq_len: int = 64
    """Tokens per packed training sequence."""
    lr: float = 3e-3
    """Peak learning rate (AdamW), cosine-decayed to 10%."""
    warmup_steps: int = 50
    """Linear warm-up steps."""
    milestones: tuple[float, ...] = (0.1, 0.25, 0.5, 1.0)
    """Fractions of the budget at which a checkpoint is kept."""
    wrong_frac: float = 0.5
    """Share of corpus solutions that carry a plausible error (leaves room for RL)."""
    truncated_frac: float = 0.05
    """Share of corpus solutions cut at a random point."""
    mix: dict = field(default_factory=lambda: {"arithmetic": 0.6, "countdown": 0.1, "strings": 0.3})
    """Task weights of the corpus."""
    task_knobs: dict = field(default_factory=lambda: {"strings": {"max_len": 4, "letters": "abcdefgh"}})
    """Constructor knobs per corpus task, e.g. {arithmetic: {max_operands: 2}} (match task.knobs). A
    retention task is built with these knobs too. The default strings knobs (words of 3-4 letters
    from a-h) make retention non-degenerate: the default base solves them at 0.2-0.8 where it
    solves none of the 26-letter words (docs/results.md, "The testbed matrix")."""
    seed: int = 0
    """Seed of corpus and initialisation."""

    def __post_init__(self):
        _check_ranges(self, "pretrain")
        _check(bool(self.mix), "pretrain.mix", "needs at least one task, e.g. {arithmetic: 1.0}")
        for name, w in self.mix.items():
            _check(isinstance(w, int | float) and not isinstance(w, bool) and math.isfinite(w) and w >= 0,
                   f"pretrain.mix.{name}", f"weight must be a finite number >= 0 (got {w!r})")
        _check(sum(self.mix.values()) > 0, "pretrain.mix", "weights sum to 0; give one task a positive weight")
        _check(all(isinstance(v, dict) for v in self.task_knobs.values()), "pretrain.task_knobs",
               "expected {task: {knob: value}}, e.g. {arithmetic: {max_operands: 2}}")


RANGES["pretrain"] = {
    "tokens": at_least(1), "batch_size": at_least(1), "seq_len": at_least(2), "lr": POSITIVE,
    "warmup_steps": NON_NEGATIVE, "milestones": FRACTION, "wrong_frac": UNIT_HALF_OPEN,
    "truncated_frac": UNIT_HALF_OPEN, "seed": NON_NEGATIVE,
}


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

    def __post_init__(self):
        _check_ranges(self, "sampling")
        _check(self.engine in ("native", "vllm"), "sampling.engine", "use native or vllm")


RANGES["sampling"] = {
    "temperature": NON_NEGATIVE, "top_p": FRACTION, "top_k": NON_NEGATIVE, "max_new_tokens": at_least(1),
    "interruption_budget": NON_NEGATIVE, "interruption_extra": NON_NEGATIVE, "vllm_gpu_memory": OPEN_UNIT,
}


AGGREGATIONS = ("token_mean", "seq_mean_token_mean", "prompt_mean", "constant", "wapo")
"""Loss aggregations (:func:`rlvr.algo.losses.token_weights`)."""
STD_NORMS = ("group", "batch", "none")
"""Advantage std normalisations (:func:`rlvr.algo.advantages.group_advantages`)."""
KL_ESTIMATORS = ("k1", "k2", "k3")

IS_CORRECTIONS = ("none", "token_tis", "seq_tis", "token_mis", "seq_mis")
"""The values of ``loss.is_correction`` (train/inference mismatch correction, :mod:`rlvr.algo.mismatch`)."""
"""KL estimators (:func:`rlvr.algo.losses.kl_penalty`)."""


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
    """KL estimator: k1 | k2 | k3."""
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
        _check_ranges(self, "loss")
        _check(self.is_correction in IS_CORRECTIONS, "loss.is_correction",
               f"unknown {self.is_correction!r}; use {' | '.join(IS_CORRECTIONS)}")
        _check(self.kl_estimator in KL_ESTIMATORS, "loss.kl_estimator", "use k1, k2 or k3")
        _check(self.std_norm in ("", *STD_NORMS), "loss.std_norm",
               f"unknown {self.std_norm!r}; use {' | '.join(STD_NORMS)} or \"\" (the variant's own)")
        _check(self.aggregation in ("", *AGGREGATIONS), "loss.aggregation",
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
    """DAPO: keep sampling until P non-zero-variance groups are collected (capped)."""
    dynamic_max_rounds: int = 4
    """DAPO dynamic sampling: most sampling rounds per step before accepting a smaller batch."""
    npr_threshold: float = 0.0
    """No-Positive-Resampling: retire prompts whose historical pass rate reaches this (0 = off)."""
    overlong_cache: int = 0
    """DAPO overlong shaping soft window L_cache in tokens (0 = off)."""
    mask_truncated: bool = False
    """Mask completions that hit the length limit out of the loss."""

    def __post_init__(self):
        _check_ranges(self, "algo")
        _check(self.minibatches <= self.prompts_per_step, "algo.minibatches",
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
        _check_ranges(self, "optim")
        _check(self.schedule in ("constant", "cosine"), "optim.schedule", "use constant or cosine")


RANGES["optim"] = {
    "lr": POSITIVE, "betas": UNIT_HALF_OPEN, "weight_decay": NON_NEGATIVE, "grad_clip": NON_NEGATIVE,
    "warmup_steps": NON_NEGATIVE,
}


@dataclass(frozen=True)
class TrainConfig:
    steps: int = 60
    """RL steps."""
    eval_every: int = 10
    """Held-out pass@1 every this many steps (0 = only at the end)."""
    eval_problems: int = 200
    """Held-out problems for the periodic evaluation."""
    eval_samples: int = 1
    """Samples per problem in the periodic evaluation (its pass@1 averages them: less noise for curve fits)."""
    final_eval_samples: int = 16
    """Samples per problem in the final base-vs-trained evaluation (pass@k up to this k)."""
    checkpoint_every: int = 20
    """Checkpoint every this many steps (and at the end)."""
    keep_last: int = 2
    """Rolling checkpoints to keep (milestones are kept too; 0 = keep every checkpoint)."""
    milestone_every: int = 0
    """Also write a checkpoint at every multiple of this step and keep it, never pruned (0 = none)."""
    seed: int = 0
    """Seed of sampling, data order and initialisation."""
    deterministic: bool = False
    """Deterministic algorithms and one thread, for bit-exact resume tests."""
    device: str = "auto"
    """Where the policy trains and samples: auto (CUDA GPU if visible, else CPU) | cpu | cuda | cuda:N."""
    out_dir: str = "runs"
    """Parent folder of run directories."""
    max_nan_steps: int = 3
    """Stop the run after this many steps with NaN/Inf loss or gradients."""
    reward_failure_value: float = 0.0
    """Reward given to a sample whose reward function raised or timed out."""
    max_reward_failure_rate: float = 0.5
    """Stop the run when more than this share of a step's rewards failed."""

    def __post_init__(self):
        _check_ranges(self, "train")
        _check(DEVICE_PATTERN.fullmatch(self.device) is not None, "train.device",
               f"{self.device!r} is not a device; use auto, cpu, cuda or cuda:N")


DEVICE_PATTERN = re.compile(r"auto|cpu|cuda(:\d+)?")
"""Valid ``train.device`` values."""

RANGES["train"] = {
    "steps": at_least(1), "eval_every": NON_NEGATIVE, "eval_problems": at_least(1), "eval_samples": at_least(1),
    "final_eval_samples": at_least(1), "checkpoint_every": at_least(1), "keep_last": NON_NEGATIVE,
    "milestone_every": NON_NEGATIVE, "seed": NON_NEGATIVE, "max_nan_steps": at_least(1),
    "reward_failure_value": FINITE, "max_reward_failure_rate": UNIT,
}


@dataclass(frozen=True)
class RewardConfig:
    kind: str = "verifier"
    """verifier (the task's) | an intrinsic reward name | mix | funcs (``reward.funcs``)."""
    weights: dict = field(default_factory=dict)
    """For kind=mix: {"verifier": w, "self_certainty": w, ...}."""
    timeout_s: float = 10.0
    """Per-sample verifier timeout in seconds, in a worker process (0 = no timeout: verify in this process)."""
    vote_threshold: float = 0.0
    """majority_vote (TTRL's voting threshold): a group whose majority answer has less than this
    share of its parsable answers gets all-zero rewards. 0 = always reward the majority."""
    funcs: tuple[str | dict, ...] = ()
    """For kind=funcs: TRL-signature reward functions ``fn(prompts, completions, **columns)``, each a
    registry name (math, numeric, exact, format, code), ``path/to/file.py:name`` or ``module:name``,
    as a string (weight 1) or ``{name: ..., weight: ...}``; the reward is their weighted sum, a
    ``None`` score leaving that function out for that completion (docs/rewards.md)."""

    def __post_init__(self):
        _check_ranges(self, "reward")
        for i, e in enumerate(self.funcs):
            good = isinstance(e, str) and bool(e) or (
                isinstance(e, dict) and isinstance(e.get("name"), str) and bool(e["name"])
                and set(e) <= {"name", "weight"} and isinstance(e.get("weight", 1.0), int | float)
                and not isinstance(e.get("weight", 1.0), bool) and math.isfinite(e.get("weight", 1.0)))
            _check(good, f"reward.funcs[{i}]", f"expected a name or {{name: ..., weight: <number>}}, got {e!r}")
        _check(self.kind != "funcs" or bool(self.funcs), "reward.funcs",
               "reward.kind=funcs needs functions, e.g. reward.funcs=[math, {name: format, weight: 0.1}]")
        _check(not self.funcs or self.kind == "funcs", "reward.kind",
               "reward.funcs is set; set reward.kind=funcs to use them")
        for name, w in self.weights.items():
            _check(isinstance(w, int | float) and not isinstance(w, bool) and math.isfinite(w),
                   f"reward.weights.{name}", f"weight must be a finite number (got {w!r})")
        _check(self.kind != "mix" or bool(self.weights), "reward.weights",
               "reward.kind=mix needs weights, e.g. reward.weights={verifier: 1.0, self_certainty: 0.1}")
        _check(self.vote_threshold == 0 or self.kind == "majority_vote" or "majority_vote" in self.weights,
               "reward.vote_threshold", "only applies to reward.kind=majority_vote (or a mix with it)")


RANGES["reward"] = {"timeout_s": NON_NEGATIVE, "vote_threshold": UNIT}


@dataclass(frozen=True)
class PipelineConfig:
    mode: str = "sync"
    """sync (generate then train) | async (PipelineRL-style)."""
    max_lag: int = 2
    """Async: most policy versions (trainer steps) a consumed sample may be behind (k; 0 = no overlap)."""
    workers: int = 1
    """Async: generator workers."""
    backend: str = "local"
    """local (generator threads in this process) | ray (generators, verifier, trainer as Ray actors)."""
    chunk_groups: int = 0
    """Async: prompt groups per generation call of a worker (0 = ceil(P / workers))."""
    sync_every: int = 8
    """Async: decoding steps between checks for new weights (in-flight update)."""
    timeout_s: float = 300.0
    """Async/data parallel: longest wait on a queue, weight sync, worker call or collective before raising."""
    max_restarts: int = 2
    """Async: restarts of a crashed generator worker before the run stops with its error."""
    bucket_mb: int = 32
    """Weight sync and gradient all-reduce: bucket size in MiB (parameters are copied bucket by bucket)."""
    ray_address: str = ""
    """Ray backend: address of an existing cluster, or "auto"; "" = the RAY_ADDRESS environment variable
    when set, else start a local instance."""
    ray_num_cpus: int = 2
    """Ray backend: CPUs of the local instance it starts."""
    ray_trainer_actor: bool = True
    """Ray backend: run the trainer as a Ray actor too (false: in the driver process)."""

    def __post_init__(self):
        _check_ranges(self, "pipeline")
        _check(self.mode in ("sync", "async"), "pipeline.mode", "use sync or async")
        _check(self.backend in ("local", "ray"), "pipeline.backend", "use local or ray")


RANGES["pipeline"] = {
    "max_lag": NON_NEGATIVE, "workers": at_least(1), "chunk_groups": NON_NEGATIVE, "sync_every": at_least(1),
    "timeout_s": POSITIVE, "max_restarts": NON_NEGATIVE, "bucket_mb": at_least(1), "ray_num_cpus": at_least(1),
}


@dataclass(frozen=True)
class LogConfig:
    progress: str = "auto"
    """auto (bar on a terminal, lines otherwise) | bar | plain | none."""
    every: int = 1
    """Plain mode: print a line every this many steps."""
    tensorboard: bool = False
    """Write TensorBoard events (needs tensorboard installed)."""
    wandb: bool = False
    """Log to Weights & Biases (needs wandb installed; ``log.wandb_mode=offline`` works without network)."""
    wandb_project: str = "rlvr"
    """W&B project."""
    wandb_name: str = ""
    """W&B run name ("" = the run directory's name)."""
    wandb_entity: str = ""
    """W&B entity (team or user; "" = your default)."""
    wandb_group: str = ""
    """W&B group ("" = none), e.g. to gather the seeds of one sweep."""
    wandb_tags: tuple[str, ...] = ()
    """W&B tags."""
    wandb_mode: str = ""
    """online | offline | disabled; "" = WANDB_MODE from the environment, else online."""
    mlflow: bool = False
    """Log to MLflow (needs mlflow installed; MLFLOW_TRACKING_URI chooses the server, default ./mlruns)."""
    mlflow_experiment: str = "rlvr"
    """MLflow experiment name."""

    def __post_init__(self):
        _check_ranges(self, "log")
        _check(self.progress in PROGRESS_MODES, "log.progress",
               f"unknown {self.progress!r}; use {' | '.join(PROGRESS_MODES)}")
        _check(self.wandb_mode in ("", *WANDB_MODES), "log.wandb_mode",
               f"unknown {self.wandb_mode!r}; use {' | '.join(WANDB_MODES)} or \"\" (WANDB_MODE, else online)")


PROGRESS_MODES = ("auto", "bar", "plain", "none")
WANDB_MODES = ("online", "offline", "disabled")
RANGES["log"] = {"every": at_least(1)}


EXCURSION_PIPELINES = ("rl", "sft", "sft_gold", "sft_then_rl", "parallel", "distill")


@dataclass(frozen=True)
class ExcursionsConfig:
    milestones: tuple[float, ...] = (0.25, 0.5, 1.0)
    """Pretraining checkpoints each pipeline starts from (fractions; each must be in pretrain.milestones)."""
    pipelines: tuple[str, ...] = EXCURSION_PIPELINES
    """Pipelines run from every checkpoint: rl sft sft_gold sft_then_rl parallel distill."""
    steps: int = 24
    """Optimiser steps per pipeline (sft_then_rl: the first half SFT, the second half RL)."""
    sft_lr: float = 0.0005
    """AdamW learning rate of the SFT updates (RL uses optim.lr)."""
    sft_batch_size: int = 0
    """Pairs per SFT step; 0 = algo.prompts_per_step * algo.group_size (an RL step's rows)."""
    sft_data: str = "sft"
    """Gold data of sft_then_rl and parallel: sft (one solution per problem) | sft_gold (all)."""
    parallel_weight: float = 0.5
    """Parallel averaging: theta <- theta + w * d_RL + (1 - w) * d_SFT."""
    teacher: str = ""
    """Distillation teacher checkpoint; "" = the rl pipeline's result from the last milestone."""
    eval_problems: int = 64
    """Held-out target-task problems per evaluation."""
    eval_samples: int = 32
    """Samples per problem for pass@k (k = 1, 8, 32 where <= this)."""
    eval_temperature: float = 0.6
    """Sampling temperature of the pass@k evaluation."""
    retention_problems: int = 128
    """Held-out problems of each task.retention_tasks task (greedy accuracy = general ability)."""
    out_dir: str = "runs/excursions"
    """Folder of the grid: one sub-folder per (milestone, pipeline) cell, table.md, table.json."""

    def __post_init__(self):
        _check_ranges(self, "excursions")
        bad = [p for p in self.pipelines if p not in EXCURSION_PIPELINES]
        _check(not bad, "excursions.pipelines", f"unknown {bad}; use {', '.join(EXCURSION_PIPELINES)}")
        _check(bool(self.milestones), "excursions.milestones", "needs at least one fraction in (0, 1]")
        _check(self.sft_data in ("sft", "sft_gold"), "excursions.sft_data", "use sft or sft_gold")


RANGES["excursions"] = {
    "milestones": FRACTION, "steps": at_least(2), "sft_lr": POSITIVE, "sft_batch_size": NON_NEGATIVE,
    "parallel_weight": UNIT, "eval_problems": at_least(1), "eval_samples": at_least(1),
    "eval_temperature": NON_NEGATIVE, "retention_problems": at_least(1),
}


@dataclass(frozen=True)
class RunConfig:
    name: str = "quickstart"
    """Run name (prefix of the run directory)."""
    model: ModelConfig = field(default_factory=ModelConfig)
    task: TaskConfig = field(default_factory=TaskConfig)
    pretrain: PretrainConfig = field(default_factory=PretrainConfig)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    algo: AlgoConfig = field(default_factory=AlgoConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    pipeline: PipelineConfig = field(default_factory=PipelineConfig)
    log: LogConfig = field(default_factory=LogConfig)
    excursions: ExcursionsConfig = field(default_factory=ExcursionsConfig)

    def __post_init__(self):
        if self.sampling.engine == "vllm":
            _check(self.model.kind == "hf", "sampling.engine",
                   "vllm generates for Hugging Face models only; set model.kind=hf or use engine native")
            _check(self.pipeline.mode == "sync", "sampling.engine",
                   "vllm is wired into the synchronous step; set pipeline.mode=sync or use engine native")
            _check(not self.sampling.interruption_budget and self.reward.kind == "verifier", "sampling.engine",
                   "vllm does no forced interruption or self-certainty; set sampling.interruption_budget=0 "
                   "and reward.kind=verifier, or use engine native")
            # vLLM's processed log-probs are renormalised over the kept tokens; the trainer's are not
            _check(self.sampling.top_p >= 1.0, "sampling.top_p",
                   "must be 1 with sampling.engine=vllm (vLLM renormalises its log-probs over the nucleus, "
                   "the trainer does not: biased ratio); set sampling.top_p=1 or use engine native")
            _check(self.sampling.top_k == 0, "sampling.top_k",
                   "must be 0 with sampling.engine=vllm (vLLM renormalises its log-probs over the top k, "
                   "the trainer does not: biased ratio); set sampling.top_k=0 or use engine native")
        _check(not (self.pipeline.mode == "async" and self.pipeline.backend == "ray"
                    and self.train.device.startswith("cuda")), "pipeline.backend",
               f"ray actors reserve only CPUs, so train.device={self.train.device} is not visible in them; "
               "use pipeline.backend=local or train.device=cpu")
        total = self.sampling.max_new_tokens + self.sampling.interruption_extra + 24
        _check(
            total <= self.model.context or self.model.kind == "hf",
            "sampling.max_new_tokens",
            f"prompt + completion may exceed model.context={self.model.context}; lower it",
        )
        _check(self.algo.overlong_cache <= self.sampling.max_new_tokens, "algo.overlong_cache",
               f"must be <= sampling.max_new_tokens={self.sampling.max_new_tokens} (got {self.algo.overlong_cache})")


# ---------------------------------------------------------------- loading


def _coerce(value, tp, key: str):
    """Check ``value`` against the annotation ``tp``; convert lists to tuples and ints to floats."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        for a in args:
            if a is type(None):
                continue
            try:
                return _coerce(value, a, key)
            except ConfigError:
                pass
        raise ConfigError(f"{key}: expected {tp}, got {value!r}")
    if dataclasses.is_dataclass(tp):
        return _from_dict(tp, value, key)
    if origin is tuple:
        _check(isinstance(value, list | tuple), key, f"expected a list, got {value!r}")
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_coerce(v, args[0], f"{key}[{i}]") for i, v in enumerate(value))
        _check(len(value) == len(args), key, f"expected {len(args)} items, got {len(value)}")
        return tuple(_coerce(v, a, f"{key}[{i}]") for i, (v, a) in enumerate(zip(value, args)))
    if tp is dict or origin is dict:
        _check(isinstance(value, dict), key, f"expected a mapping, got {value!r}")
        return dict(value)
    if tp is float:
        if isinstance(value, str):  # YAML 1.1 reads "1e-4" as a string
            try:
                value = float(value)
            except ValueError:
                pass
        _check(isinstance(value, int | float) and not isinstance(value, bool), key,
               f"expected a number, got {value!r}")
        return float(value)
    if tp is int:
        _check(isinstance(value, int) and not isinstance(value, bool), key,
               f"expected an integer, got {value!r}")
        return value
    if tp is bool:
        _check(isinstance(value, bool), key, f"expected true or false, got {value!r}")
        return value
    if tp is str:
        _check(isinstance(value, str), key, f"expected a string, got {value!r}")
        return value
    return value


def _from_dict(cls, data, prefix: str = ""):
    if isinstance(data, cls):
        return data
    where = prefix or "config"
    _check(isinstance(data, dict), where, f"expected a mapping, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    kwargs = {}
    for key, value in data.items():
        full = f"{prefix}.{key}" if prefix else key
        if key not in names:
            close = difflib.get_close_matches(str(key), names, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(names)}"
            raise ConfigError(f"{full}: unknown key{hint}")
        kwargs[key] = _coerce(value, hints[key], full)
    try:
        return cls(**kwargs)
    except TypeError as e:
        raise ConfigError(f"{where}: {e}") from None


def set_dotted(data: dict, dotted: str, value) -> None:
    """Set ``a.b.c = value`` in a nested dict, creating levels as needed."""
    parts = dotted.split(".")
    node = data
    for p in parts[:-1]:
        node = node.setdefault(p, {})
        if not isinstance(node, dict):
            raise ConfigError(f"{dotted}: {p} is not a section")
    node[parts[-1]] = value


def parse_overrides(overrides: list[str]) -> dict:
    """``["loss.eps_high=0.28", "train.steps=5"]`` -> nested dict (values parsed as YAML)."""
    out: dict = {}
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override {item!r}: expected key=value, e.g. loss.eps_high=0.28")
        key, raw = item.split("=", 1)
        try:
            value = yaml.safe_load(raw) if raw != "" else ""
        except yaml.YAMLError as e:
            raise ConfigError(f"{key.strip()}: value {raw!r} is not valid YAML ({str(e).splitlines()[0]}); "
                              "quote the override, e.g. 'reward.weights={verifier: 1.0}'") from None
        set_dotted(out, key.strip(), value)
    return out


def _merge(base: dict, extra: dict) -> dict:
    out = dict(base)
    for k, v in extra.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def builtin_config_path(name: str) -> Path | None:
    """Path of a config shipped with the package (``quickstart``, ``grpo``, ...), if any."""
    p = Path(__file__).parent / "configs" / f"{name}.yaml"
    return p if p.exists() else None


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> RunConfig:
    """Load a YAML file (or a built-in config name) with dotted overrides on top."""
    data: dict = {}
    if path:
        p = Path(path)
        if not p.exists():
            p = builtin_config_path(str(path)) or p
        if not p.exists():
            shipped = sorted(x.stem for x in (Path(__file__).parent / "configs").glob("*.yaml"))
            raise ConfigError(f"{path}: no such config file; give a path or one of {', '.join(shipped)}")
        try:
            data = yaml.safe_load(p.read_text()) or {}
        except yaml.YAMLError as e:
            raise ConfigError(f"{p}: not valid YAML ({str(e).splitlines()[0]})") from None
    data = _merge(data, parse_overrides(overrides or []))
    return _from_dict(RunConfig, data)


def to_dict(cfg) -> dict:
    """Plain nested dict (tuples as lists) of a config dataclass."""
    return json.loads(json.dumps(dataclasses.asdict(cfg)))


def dump_yaml(cfg) -> str:
    return yaml.safe_dump(to_dict(cfg), sort_keys=False)


def config_hash(obj) -> str:
    """Short stable hash of a config (dataclass or dict)."""
    d = to_dict(obj) if dataclasses.is_dataclass(obj) else obj
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:12]
