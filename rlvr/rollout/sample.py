"""Batched sampling with a preallocated KV cache.

One prefill over the left-padded prompts, then one token per step for all live
rows. Finished rows stop being computed (the batch is compacted), so the cost
follows the live samples. For every sample: token ids, the behaviour log-probs
of the sampled tokens (under the tempered, untruncated distribution: the one the
trainer recomputes), next-token entropies, the policy version of every token and
the finish reason (eos | stop | length | interrupted).

Forced length interruption (ScaleRL): a row that spends ``interruption_budget``
tokens without emitting the end-of-reasoning marker gets the interruption text
appended (tokens forced, masked out of the loss) and ``interruption_extra``
more tokens to answer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from rlvr.types import RolloutBatch


@dataclass(frozen=True)
class SampleParams:
    """Scalars of one sampling call (see SamplingConfig for their meaning)."""

    max_new_tokens: int = 48
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    stop_ids: tuple[tuple[int, ...], ...] = ()  # token sequences that end a completion
    interruption_budget: int = 0
    interruption_ids: tuple[int, ...] = ()  # forced tokens appended at the budget
    marker_ids: tuple[int, ...] = ()  # end-of-reasoning marker; rows that emitted it are not interrupted
    interruption_extra: int = 8
    self_certainty: bool = False


def sample_next(logits: torch.Tensor, p: SampleParams, gen: torch.Generator | None):
    """logits (N, V) float32 -> (token (N,), logp (N,), entropy (N,), self-certainty (N,) or None)."""
    if p.temperature > 0:
        logits = logits / p.temperature
    logp_all = torch.log_softmax(logits, dim=-1)
    probs = logp_all.exp()
    entropy = -(probs * logp_all).sum(-1)
    sc = None
    if p.self_certainty:
        sc = torch.logsumexp(logits, -1) - logits.mean(-1) - torch.log(torch.tensor(float(logits.shape[-1])))
    if p.temperature == 0:
        tok = logits.argmax(-1)
    else:
        w = probs
        if p.top_k > 0:
            kth = torch.topk(w, min(p.top_k, w.shape[-1]), dim=-1).values[:, -1:]
            w = torch.where(w >= kth, w, torch.zeros_like(w))
        if p.top_p < 1.0:
            sw, si = torch.sort(w, dim=-1, descending=True)
            keep = (sw.cumsum(-1) - sw) < p.top_p * sw.sum(-1, keepdim=True)
            w = torch.zeros_like(w).scatter(-1, si, sw * keep)
        tok = torch.multinomial(w, 1, generator=gen).squeeze(-1)
    return tok, logp_all.gather(-1, tok[:, None]).squeeze(-1), entropy, sc


def _ends_with(buf: torch.Tensor, n: torch.Tensor, seq: tuple[int, ...]) -> torch.Tensor:
    """buf (N, T) tokens, n (N,) lengths -> (N,) whether buf[i, :n_i] ends with ``seq``."""
    m = len(seq)
    if m == 0 or buf.shape[1] < m:
        return torch.zeros_like(n, dtype=torch.bool)
    idx = (n[:, None] - m + torch.arange(m, device=buf.device)).clamp(min=0)
    tail = buf.gather(1, idx)
    return (tail == torch.tensor(seq, device=buf.device)).all(-1) & (n >= m)


@torch.no_grad()
def generate(
    model,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    params: SampleParams,
    *,
    eos_id: int,
    pad_id: int,
    version: int = 0,
    generator: torch.Generator | None = None,
    weight_sync: Callable[[], int | None] | None = None,
    sync_every: int = 8,
) -> RolloutBatch:
    """Sample one completion per row of ``prompt_ids`` (B, Tp) (left-padded).

    ``weight_sync``, if given, is called every ``sync_every`` decoding steps; when it
    returns a new version the model's weights were replaced in place (in-flight
    update): sequences continue with the KV cache they have, later tokens carry the
    new version.
    """
    B, Tp = prompt_ids.shape
    p = params
    forced = torch.tensor(p.interruption_ids, dtype=torch.long)
    t_total = p.max_new_tokens + (len(p.interruption_ids) + p.interruption_extra if p.interruption_budget else 0)
    cache = model.new_cache(B, Tp + t_total)
    out = {
        "ids": torch.full((B, t_total), pad_id, dtype=torch.long),
        "logp": torch.zeros(B, t_total),
        "ent": torch.zeros(B, t_total),
        "sc": torch.zeros(B, t_total),
        "ver": torch.zeros(B, t_total, dtype=torch.long),
        "loss": torch.zeros(B, t_total, dtype=torch.bool),
    }
    n = torch.zeros(B, dtype=torch.long)  # tokens so far per row
    reason = ["length"] * B
    live = torch.arange(B)  # original row index of each cache row
    limit = torch.full((B,), p.max_new_tokens, dtype=torch.long)
    force_pos = torch.full((B,), -1, dtype=torch.long)  # index into forced ids, -1 = not forcing
    interrupted = torch.zeros(B, dtype=torch.bool)
    saw_marker = torch.zeros(B, dtype=torch.bool)

    cache.key_mask[:, :Tp] = prompt_mask
    logits = model(prompt_ids, cache.key_mask[:, :Tp], cache)[:, -1]
    step = 0
    while live.numel() > 0:
        tok, logp, ent, sc = sample_next(logits, p, generator)
        fp = force_pos[live]
        if (fp >= 0).any():  # forced interruption tokens replace the sample
            f_rows = fp >= 0
            tok = torch.where(f_rows, forced[fp.clamp(min=0)], tok)
            logp = torch.where(f_rows, torch.log_softmax(logits / max(p.temperature, 1e-6), -1)
                               .gather(-1, tok[:, None]).squeeze(-1), logp)
        r, t = live, n[live]
        out["ids"][r, t], out["logp"][r, t], out["ent"][r, t] = tok, logp, ent
        if sc is not None:
            out["sc"][r, t] = sc
        out["ver"][r, t] = version
        out["loss"][r, t] = fp < 0
        n[r] += 1
        done = _finish(out["ids"], n, r, tok, fp, p, eos_id, limit, force_pos, forced, interrupted,
                       saw_marker, reason)
        keep = ~done
        if not keep.all():
            live, tok = live[keep], tok[keep]
            cache.select(keep.nonzero().squeeze(-1))
            if live.numel() == 0:
                break
        step += 1
        if weight_sync is not None and step % sync_every == 0:
            new = weight_sync()
            if new is not None:
                version = new
        s = cache.length
        cache.key_mask[:, s] = True
        logits = model(tok[:, None], cache.key_mask[:, : s + 1], cache)[:, -1]

    width = int(n.max()) if B else 0
    cmask = torch.arange(width)[None, :] < n[:, None]
    return RolloutBatch(
        prompt_ids=prompt_ids,
        prompt_mask=prompt_mask,
        completion_ids=out["ids"][:, :width],
        completion_mask=cmask,
        loss_mask=out["loss"][:, :width] & cmask,
        behaviour_logp=out["logp"][:, :width] * cmask,
        entropy=out["ent"][:, :width] * cmask,
        versions=out["ver"][:, :width],
        finish_reason=reason,
        self_certainty=out["sc"][:, :width] * cmask if p.self_certainty else None,
    )


def _finish(ids, n, rows, tok, fp, p: SampleParams, eos_id, limit, force_pos, forced, interrupted,
            saw_marker, reason) -> torch.Tensor:
    """Update per-row state after writing ``tok`` for ``rows``; return (N,) bool: row finished."""
    nr = n[rows]
    done = tok == eos_id
    stop = torch.zeros_like(done)
    for seq in p.stop_ids:
        stop |= _ends_with(ids[rows], nr, seq)
    if p.interruption_budget:
        if p.marker_ids:
            saw_marker[rows] |= _ends_with(ids[rows], nr, p.marker_ids)
        adv = fp >= 0
        force_pos[rows[adv]] += 1
        end_force = adv & (force_pos[rows] >= len(forced))
        force_pos[rows[end_force]] = -1
        start = (fp < 0) & ~interrupted[rows] & ~saw_marker[rows] & (nr >= p.interruption_budget) & ~done
        if start.any():
            s_rows = rows[start]
            interrupted[s_rows] = True
            force_pos[s_rows] = 0
            limit[s_rows] = nr[start] + len(forced) + p.interruption_extra
    length = nr >= limit[rows]
    finished = done | stop | length
    for i in finished.nonzero().squeeze(-1).tolist():
        row = int(rows[i])
        if bool(interrupted[row]):
            reason[row] = "interrupted"
        elif bool(done[i]):
            reason[row] = "eos"
        elif bool(stop[i]):
            reason[row] = "stop"
        else:
            reason[row] = "length"
    return finished
