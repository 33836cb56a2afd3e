"""The policy's sections: ``model`` (the architecture and how it runs) and ``pretrain`` (how the
tiny base model it starts from is pretrained)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from rlvr.config.checks import (
    FRACTION,
    NON_NEGATIVE,
    POSITIVE,
    RANGES,
    UNIT_HALF_OPEN,
    at_least,
    check,
    check_section_ranges,
)

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
        check_section_ranges(self, "model")
        check(self.kind in ("tiny", "hf"), "model.kind", f"unknown {self.kind!r}; use tiny or hf")
        check(self.mlp in ("swiglu", "gelu"), "model.mlp", "use swiglu or gelu")
        check(self.dtype in DTYPES, "model.dtype", "use auto, float32 or bfloat16")
        check(self.d_model % self.n_head == 0, "model.d_model", "must be divisible by model.n_head")
        check((self.d_model // self.n_head) % 2 == 0, "model.n_head", "head size must be even (RoPE)")
        check(self.kind != "hf" or bool(self.path), "model.path", "set it for model.kind=hf")
        check(all(isinstance(k, str) and k.isidentifier() for k in self.chat_template_kwargs),
              "model.chat_template_kwargs", "keys must be names (e.g. {enable_thinking: false})")
        check(not self.chat_template_kwargs or (self.kind == "hf" and self.chat_template),
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
        check_section_ranges(self, "pretrain")
        check(bool(self.mix), "pretrain.mix", "needs at least one task, e.g. {arithmetic: 1.0}")
        for name, w in self.mix.items():
            check(isinstance(w, int | float) and not isinstance(w, bool) and math.isfinite(w) and w >= 0,
                  f"pretrain.mix.{name}", f"weight must be a finite number >= 0 (got {w!r})")
        check(sum(self.mix.values()) > 0, "pretrain.mix", "weights sum to 0; give one task a positive weight")
        check(all(isinstance(v, dict) for v in self.task_knobs.values()), "pretrain.task_knobs",
              "expected {task: {knob: value}}, e.g. {arithmetic: {max_operands: 2}}")


RANGES["pretrain"] = {
    "tokens": at_least(1), "batch_size": at_least(1), "seq_len": at_least(2), "lr": POSITIVE,
    "warmup_steps": NON_NEGATIVE, "milestones": FRACTION, "wrong_frac": UNIT_HALF_OPEN,
    "truncated_frac": UNIT_HALF_OPEN, "seed": NON_NEGATIVE,
}

