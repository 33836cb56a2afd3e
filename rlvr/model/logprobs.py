"""Log-probs of completion tokens under a policy, by one teacher-forced forward."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from rlvr.model.shared_prompt import shared_prompt_hidden
from rlvr.model.tiny import TinyGPT
from rlvr.types import RolloutBatch


def sequences(rb: RolloutBatch, rows=None) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Full sequences (B, Tp + T): left-padded prompt + right-padded completion, key mask, Tp."""
    sl = slice(None) if rows is None else rows
    ids = torch.cat([rb.prompt_ids[sl], rb.completion_ids[sl]], dim=1)
    mask = torch.cat([rb.prompt_mask[sl], rb.completion_mask[sl]], dim=1)
    return ids, mask, rb.prompt_ids.shape[1]


BUCKET_OVERHEAD = 64
"""What one more length bucket costs (:func:`length_buckets`), in sequence positions: the fixed cost of
one more forward and backward pass against the positions a finer cut saves. Measured on one 64 x 8
mini-batch of the embedded recipe (Xeon family 6 model 207, one thread): 32 to 128 (3 to 5 buckets)
within 3% of each other; 0 (19 buckets) 13% slower, 512 (2 buckets) 9% slower."""


def completion_logits(model, ids: torch.Tensor, key_mask: torch.Tensor, tp: int,
                      temperature: float = 1.0, trim: bool = True) -> torch.Tensor:
    """ids, key_mask (B, Tp + T) -> next-token logits at the completion positions (B, T, V),
    divided by the sampling temperature (so they match the behaviour log-probs).

    With ``trim`` the rows run in :func:`length_buckets`, each bucket cut to its longest completion
    and the prompts to their longest (left padding every row has), and a tiny model runs each distinct
    prompt once for all its rows (:mod:`rlvr.model.shared_prompt`): positions count real tokens and
    padding keys are masked, so a row's logits are the same up to float rounding (the sums run over
    fewer masked terms and matrices of other shapes), and neither the padding no row needs nor a
    prompt's repeats are computed. A row's logits past its bucket's longest completion are 0 (nothing
    reads a padding position's logits: every loss and statistic masks them)."""
    B, S = ids.shape
    T = S - tp
    if not trim or not B:
        return _logits(model, ids, key_mask, tp, temperature)
    first = int(key_mask[:, :tp].long().argmax(-1).min()) if tp else 0  # leading all-padding columns
    ids, key_mask, tp = ids[:, first:], key_mask[:, first:], tp - first
    lengths = last_real(key_mask[:, tp:])
    buckets = length_buckets(lengths.tolist(), tp, BUCKET_OVERHEAD)
    rows = [torch.tensor(bucket, device=ids.device) for bucket in buckets]
    widths = [int(lengths[index].max()) for index in rows]
    if isinstance(model, TinyGPT) and tp:
        parts = _shared_prompt_logits(model, ids, key_mask, tp, rows, widths)
    else:
        parts = [_logits(model, ids[index, : tp + width], key_mask[index, : tp + width], tp, 1.0)
                 for index, width in zip(rows, widths)]
    if temperature > 0 and temperature != 1.0:
        parts = [part / temperature for part in parts]
    order = torch.cat(rows)
    inverse = torch.empty(B, dtype=torch.long, device=ids.device)
    inverse[order] = torch.arange(B, device=ids.device)
    return torch.cat([F.pad(part, (0, 0, 0, T - width)) for part, width in zip(parts, widths)])[inverse]


def _shared_prompt_logits(model, ids: torch.Tensor, key_mask: torch.Tensor, tp: int, rows: list[torch.Tensor],
                          widths: list[int]) -> list[torch.Tensor]:
    """Logits (b_k, width_k, V) of each bucket's rows, every distinct prompt run once."""
    prompts, prompt_of = torch.unique(torch.cat([ids[:, :tp], key_mask[:, :tp].long()], 1), dim=0,
                                      return_inverse=True)
    prompt_ids, prompt_mask = prompts[:, :tp], prompts[:, tp:].bool()
    groups = [(prompt_of[index], ids[index, tp : tp + width - 1], key_mask[index, tp : tp + width - 1])
              for index, width in zip(rows, widths) if width > 1]
    h_prompt, h_groups = shared_prompt_hidden(model, prompt_ids, prompt_mask, groups)
    last = h_prompt[:, -1:]  # (P, 1, D): the hidden state that predicts each completion's first token
    parts, h_next = [], iter(h_groups)
    for index, width in zip(rows, widths):
        h = last[prompt_of[index]]
        if width > 1:
            h = torch.cat([h, next(h_next)], 1)
        parts.append(model.logits(h[:, :width]))
    return parts


def _logits(model, ids: torch.Tensor, key_mask: torch.Tensor, tp: int, temperature: float) -> torch.Tensor:
    h = model.hidden(ids, key_mask)
    logits = model.logits(h[:, tp - 1 : -1])
    return logits / temperature if temperature > 0 and temperature != 1.0 else logits


def last_real(mask: torch.Tensor) -> torch.Tensor:
    """mask (B, T) bool -> (B,) long: one past each row's last True position (0 for an empty row)."""
    position = torch.arange(1, mask.shape[1] + 1, device=mask.device)
    return (mask.long() * position).amax(-1) if mask.shape[1] else mask.new_zeros(mask.shape[0], dtype=torch.long)


def length_buckets(lengths: list[int], extra: int, overhead: int) -> list[list[int]]:
    """Rows grouped by completion length so that each group runs cut to its longest row: the grouping
    of the rows sorted by length that minimises sum over groups (rows x (``extra`` + longest length)
    + ``overhead``) (dynamic programming over the distinct lengths). -> the row indices of each
    group, shortest group first, each in increasing length (ties by row)."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    distinct = sorted(set(lengths))
    count_upto = [0]  # rows with length <= distinct[k - 1]
    for width in distinct:
        count_upto.append(count_upto[-1] + sum(1 for n in lengths if n == width))
    best = [0.0] + [float("inf")] * len(distinct)  # best[k]: cost of the rows of the k shortest lengths
    cut = [0] * (len(distinct) + 1)
    for k in range(1, len(distinct) + 1):
        for j in range(k):  # the last group holds the lengths distinct[j:k]
            cost = best[j] + (count_upto[k] - count_upto[j]) * (extra + distinct[k - 1]) + overhead
            if cost < best[k]:
                best[k], cut[k] = cost, j
    bounds, k = [], len(distinct)
    while k > 0:
        bounds.append((count_upto[cut[k]], count_upto[k]))
        k = cut[k]
    return [order[a:b] for a, b in reversed(bounds)]


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
