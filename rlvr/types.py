"""Containers passed between modules. Shapes: P prompts, G samples per prompt,
B = P*G completions, T completion tokens (right-padded)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

import torch


@dataclass
class RolloutBatch:
    """What the sampler returns for B completions.

    Completion tensors are right-padded to T; prompts are kept separately
    (left-padded) so that the trainer can rebuild full sequences.
    """

    prompt_ids: torch.Tensor  # (B, Tp) long, left-padded with pad_id
    prompt_mask: torch.Tensor  # (B, Tp) bool
    completion_ids: torch.Tensor  # (B, T) long, right-padded with pad_id
    completion_mask: torch.Tensor  # (B, T) bool, 1 on generated tokens (EOS included)
    loss_mask: torch.Tensor  # (B, T) bool, completion_mask minus injected (non-sampled) tokens
    behaviour_logp: torch.Tensor  # (B, T) float32, log-prob of each token under the policy that sampled it
    entropy: torch.Tensor  # (B, T) float32, next-token entropy at each generated position (nats)
    versions: torch.Tensor  # (B, T) long, policy version that produced each token
    finish_reason: list[str]  # B entries: "eos" | "stop" | "length" | "interrupted"
    texts: list[str] = field(default_factory=list)  # B decoded completions (special tokens removed)
    self_certainty: torch.Tensor | None = None  # (B, T) float32, KL(U || pi) per position, if asked

    def to(self, device) -> RolloutBatch:
        """The same batch with every tensor on ``device``."""
        moved = {f.name: getattr(self, f.name).to(device) for f in fields(self)
                 if isinstance(getattr(self, f.name), torch.Tensor)}
        return replace(self, **moved)

    @property
    def size(self) -> int:
        return self.completion_ids.shape[0]

    @property
    def lengths(self) -> torch.Tensor:
        """(B,) number of completion tokens."""
        return self.completion_mask.sum(-1)
