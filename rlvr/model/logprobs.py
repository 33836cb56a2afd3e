"""Log-probs of completion tokens under a policy, by one teacher-forced forward."""

from __future__ import annotations

import torch

from rlvr.types import RolloutBatch


def sequences(rb: RolloutBatch, rows=None) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Full sequences (B, Tp + T): left-padded prompt + right-padded completion, key mask, Tp."""
    sl = slice(None) if rows is None else rows
    ids = torch.cat([rb.prompt_ids[sl], rb.completion_ids[sl]], dim=1)
    mask = torch.cat([rb.prompt_mask[sl], rb.completion_mask[sl]], dim=1)
    return ids, mask, rb.prompt_ids.shape[1]


def completion_logits(model, ids: torch.Tensor, key_mask: torch.Tensor, tp: int,
                      temperature: float = 1.0) -> torch.Tensor:
    """ids, key_mask (B, Tp + T) -> next-token logits at the completion positions (B, T, V),
    divided by the sampling temperature (so they match the behaviour log-probs)."""
    h = model.hidden(ids, key_mask)
    logits = model.logits(h[:, tp - 1 : -1])
    return logits / temperature if temperature > 0 and temperature != 1.0 else logits


def token_logprobs(logits: torch.Tensor, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """logits (B, T, V), tokens (B, T) -> (logp (B, T), entropy (B, T))."""
    logp_all = torch.log_softmax(logits.float(), dim=-1)
    logp = logp_all.gather(-1, tokens[..., None]).squeeze(-1)
    entropy = -(logp_all.exp() * logp_all).sum(-1)
    return logp, entropy


@torch.no_grad()
def score(model, rb: RolloutBatch, temperature: float = 1.0, batch_size: int = 256) -> torch.Tensor:
    """(B, T) log-probs of rb's completions under ``model`` (no gradient), in chunks; 0 on padding and
    on environment tokens (a tool task's observations: read, never sampled)."""
    out = []
    for s in range(0, rb.size, batch_size):
        rows = slice(s, s + batch_size)
        ids, mask, tp = sequences(rb, rows)
        out.append(token_logprobs(completion_logits(model, ids, mask, tp, temperature),
                                  rb.completion_ids[rows])[0])
    return torch.cat(out) * rb.policy_mask  # environment tokens carry no log-prob
