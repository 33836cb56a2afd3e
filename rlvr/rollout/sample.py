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

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from rlvr.errors import UserError
from rlvr.tasks.environment import EpisodeLimits
from rlvr.types import RolloutBatch

COMPACT_FRACTION = 8
"""Finished rows stay in the batch (computed, ignored) until they are 1/COMPACT_FRACTION of it: then
one compaction drops them all. Compacting at every finish copied the whole KV cache once per step
in which any row finished, which cost more than the rows it saved."""


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
    self_certainty: bool = False  # also record per position the self-certainty and the top-2 margin
    episode: EpisodeLimits = EpisodeLimits()  # turn / tool bounds of a tool task's episodes (rollout.episodes)


def sample_next(logits: torch.Tensor, p: SampleParams, gen: torch.Generator | None):
    """logits (N, V) float32 -> (token (N,), logp (N,), entropy (N,), (self-certainty (N,), top-2 margin
    (N,)) or None, logp_all (N, V)).

    Log-probs and entropy are those of the tempered, untruncated distribution (what the trainer
    recomputes); top-k / top-p only restrict where the sample may fall. Sampling draws one uniform
    per row and inverts the CDF (cheaper than ``torch.multinomial`` for a batch of rows). All of it
    runs in float32 whatever the logits' dtype: in bf16 most CDF steps of a large vocabulary vanish.
    """
    logits = logits.float()
    if p.temperature > 0 and p.temperature != 1.0:
        logits = logits / p.temperature
    logp_all = torch.log_softmax(logits, dim=-1)
    probs = logp_all.exp()
    entropy = -(probs * logp_all).sum(-1)
    sc = None
    if p.self_certainty:  # KL(U || pi) = logsumexp(z) - mean(z) - log V, with logsumexp(z) = z - logp
        top2 = probs.topk(min(2, probs.shape[-1]), dim=-1).values
        margin = top2[:, 0] - top2[:, 1] if top2.shape[-1] == 2 else top2[:, 0]
        sc = (logits[:, 0] - logp_all[:, 0] - logits.mean(-1) - math.log(logits.shape[-1]), margin)
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
        cdf = w.cumsum(-1)
        u = torch.rand((w.shape[0], 1), generator=gen, device=gen.device if gen is not None else w.device)
        u = u.to(w.device) * cdf[:, -1:]  # a CPU generator drives sampling on any device
        tok = (cdf <= u).sum(-1).clamp_(max=w.shape[-1] - 1)  # first index with cdf > u (its p > 0)
    return tok, logp_all.gather(-1, tok[:, None]).squeeze(-1), entropy, sc, logp_all


def prefill(model, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, repeats: torch.Tensor | None, t_new: int):
    """Run the prompts (G, Tp) once -> (cache, next-token logits (N, V)) for N = repeats.sum() rows
    (row order: prompt 0 ``repeats[0]`` times, then prompt 1, ...; N = G without ``repeats``).

    With ``repeats``, a model with ``prefill_shared`` keeps each prompt's keys once (a shared-prefix
    cache, decoded by its ``decode_shared``); any other model's cache rows are copied per sample
    after the one prefill."""
    G, Tp = prompt_ids.shape
    if repeats is not None and hasattr(model, "prefill_shared"):
        return model.prefill_shared(prompt_ids, prompt_mask, repeats, t_new)
    cache = model.new_cache(G, Tp + t_new)
    cache.key_mask[:, :Tp] = prompt_mask
    logits = model.logits(model.hidden(prompt_ids, cache.key_mask[:, :Tp], cache)[:, -1:])[:, -1]  # last only
    if repeats is not None:
        rows = torch.arange(G, device=prompt_ids.device).repeat_interleave(repeats)
        cache.select(rows)
        logits = logits[rows]
    return cache, logits


def runs_of(items: list) -> tuple[list, list[int]]:
    """Consecutive equal items -> (one item per run, run lengths): [a, a, b, a] -> ([a, b, a], [2, 1, 1])."""
    firsts: list = []
    counts: list[int] = []
    for x in items:
        if firsts and firsts[-1] == x:
            counts[-1] += 1
        else:
            firsts.append(x)
            counts.append(1)
    return firsts, counts


def fixed_context(model) -> int | None:
    """The positions ``model`` can hold: a tiny model's ``model.context`` (its rotary table); None for a
    model without a fixed context here (Hugging Face)."""
    cfg = getattr(model, "cfg", None)
    return None if cfg is None or cfg.kind == "hf" else cfg.context


def _check_context(model, prompt_mask: torch.Tensor, repeats: torch.Tensor | None, new_tokens: torch.Tensor) -> None:
    """Raise UserError when a row's real prompt tokens (``prompt_mask`` (B, Tp), rows repeated by
    ``repeats``) plus its ``new_tokens`` (B_out,) would pass the model's :func:`fixed_context`."""
    context = fixed_context(model)
    if context is None:
        return
    real = prompt_mask.sum(-1)
    if repeats is not None:
        real = real.repeat_interleave(repeats)
    need = real + new_tokens
    if bool((need > context).any()):
        i = int(need.argmax())
        raise UserError(f"a prompt of {int(real[i])} tokens plus {int(new_tokens[i])} new tokens passes "
                        f"model.context={context}: raise model.context, lower sampling.max_new_tokens, "
                        "or shorten the prompts")


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
    repeats: torch.Tensor | None = None,
    on_step: Callable[[int], None] | None = None,
    row_limits: torch.Tensor | None = None,
) -> RolloutBatch:
    """Sample one completion per row of ``prompt_ids`` (B, Tp) (left-padded), or with ``repeats``
    (B,) long, ``repeats[i]`` completions of prompt i (rows in that order: prefix sharing, each
    prompt prefilled once, see :func:`prefill`). Both give the same samples from the same
    generator as the prompts repeated row by row, up to float rounding in the attention sums.

    All live rows advance in lockstep, so completion position t is always written at decoding step
    t: per-step state lives in buffers of the live rows (cache order), written with plain slices,
    and a row's buffers are copied to the output once, when it finishes (then the batch and the KV
    cache are compacted). ``weight_sync``, if given, is called every ``sync_every`` decoding steps;
    when it returns a new version the model's weights were replaced in place (in-flight update):
    sequences continue with the KV cache they have, later tokens carry the new version.
    ``on_step``, if given, is called with the decoding steps done since its last call (progress
    display): 1 per step, and when every row finishes early the steps left, so that the calls of one
    batch add up to its step budget (``max_new_tokens`` plus the interruption's tokens).
    ``row_limits`` (B,) long, if given: each row's own cap on new tokens (at most ``max_new_tokens``;
    a row reaching it finishes ``length``). A model with a fixed context (the tiny model's
    ``model.context``) must hold every row's prompt plus its new tokens, else
    :class:`~rlvr.errors.UserError` says so before sampling.
    """
    with torch.inference_mode():  # cheaper dispatch; results are cloned out of inference mode below
        if repeats is not None:
            repeats = repeats.to(prompt_ids.device)
        p, dev = params, prompt_ids.device
        forced = torch.tensor(p.interruption_ids, dtype=torch.long, device=dev)
        n_forced = len(p.interruption_ids)
        t_total = p.max_new_tokens + (n_forced + p.interruption_extra if p.interruption_budget else 0)
        stops = [(torch.tensor(s, dtype=torch.long, device=dev), len(s)) for s in p.stop_ids if len(s)]
        marker = torch.tensor(p.marker_ids, dtype=torch.long, device=dev)
        cache, logits = prefill(model, prompt_ids, prompt_mask, repeats, t_total)
        shared = getattr(cache, "shared", False)  # a shared-prefix cache: the model's decode_shared step
        decode_step = model.decode_shared if shared else getattr(model, "decode_step", None)
        B = int(repeats.sum()) if repeats is not None else prompt_ids.shape[0]  # output rows

        # outputs by original row, filled when a row finishes
        out_ids = torch.full((B, t_total), pad_id, dtype=torch.long, device=dev)
        out_f = torch.zeros(B, t_total, 4, device=dev)  # behaviour logp, entropy, self-certainty, top-2 margin
        out_loss = torch.zeros(B, t_total, dtype=torch.bool, device=dev)
        out_len = torch.zeros(B, dtype=torch.long, device=dev)
        reason = ["length"] * B
        step_version: list[int] = []  # version of the policy that produced completion position t
        # state of the live rows, in cache order
        live = torch.arange(B, device=dev)  # original row of each live row
        w_ids = torch.full((B, t_total), pad_id, dtype=torch.long, device=dev)
        w_f = torch.zeros(B, t_total, 4, device=dev)
        w_loss = torch.ones(B, t_total, dtype=torch.bool, device=dev)
        limit = torch.full((B,), p.max_new_tokens, dtype=torch.long, device=dev)
        if row_limits is not None:
            limit = torch.minimum(limit, row_limits.to(dev))
        _check_context(model, prompt_mask, repeats, limit + (t_total - p.max_new_tokens))
        force_pos = torch.full((B,), -1, dtype=torch.long, device=dev)  # index into forced ids, -1 = not forcing
        interrupted = torch.zeros(B, dtype=torch.bool, device=dev)
        saw_marker = torch.zeros(B, dtype=torch.bool, device=dev)
        forcing = False  # some live row is being forced (skips the checks otherwise)
        done = torch.zeros(B, dtype=torch.bool, device=dev)  # finished rows still in the batch (copied out)

        for step in range(t_total):
            tok, logp, ent, sc, logp_all = sample_next(logits, p, generator)
            if forcing:  # forced interruption tokens replace the sample and are masked out of the loss
                f_rows = force_pos >= 0
                tok = torch.where(f_rows, forced[force_pos.clamp(min=0)], tok)
                logp = torch.where(f_rows, logp_all.gather(-1, tok[:, None]).squeeze(-1), logp)
                w_loss[:, step] = ~f_rows
            w_ids[:, step] = tok
            w_f[:, step, 0] = logp
            w_f[:, step, 1] = ent
            if sc is not None:
                w_f[:, step, 2], w_f[:, step, 3] = sc
            step_version.append(version)
            n = step + 1  # tokens every live row holds now

            eos = tok == eos_id
            stop = torch.zeros_like(eos)
            for seq, m in stops:
                if n >= m:
                    stop |= (w_ids[:, n - m : n] == seq).all(-1)
            if p.interruption_budget:
                if len(marker) and n >= len(marker):
                    saw_marker |= (w_ids[:, n - len(marker) : n] == marker).all(-1)
                if forcing:
                    was = force_pos >= 0
                    force_pos = torch.where(was, force_pos + 1, force_pos)
                    force_pos = torch.where(was & (force_pos >= n_forced), torch.full_like(force_pos, -1), force_pos)
                if n >= p.interruption_budget:
                    start = (force_pos < 0) & ~interrupted & ~saw_marker & ~eos & ~done
                    if forcing:
                        start &= ~was
                    if start.any():
                        interrupted |= start
                        force_pos = torch.where(start, torch.zeros_like(force_pos), force_pos)
                        limit = torch.where(start, torch.full_like(limit, n + n_forced + p.interruption_extra), limit)
                forcing = bool((force_pos >= 0).any())
            finished = (eos | stop | (limit <= n)) & ~done  # rows finishing at this step
            if bool(finished.any()):
                idx = finished.nonzero().squeeze(-1)
                rows = live[idx]
                out_ids[rows], out_f[rows], out_loss[rows], out_len[rows] = w_ids[idx], w_f[idx], w_loss[idx], n
                flags = zip(rows.tolist(), eos[idx].tolist(), stop[idx].tolist(), interrupted[idx].tolist())
                for row, e, s, intr in flags:
                    reason[row] = "interrupted" if intr else "eos" if e else "stop" if s else "length"
                done |= finished
                n_done = int(done.sum())
                if n_done == done.numel():
                    if on_step is not None:
                        on_step(t_total - step)  # this step and the ones no row needs
                    break
                if n_done * COMPACT_FRACTION >= done.numel():  # drop the finished rows: batch and cache shrink
                    keep = (~done).nonzero().squeeze(-1)
                    done = done[keep]
                    live, tok = live[keep], tok[keep]
                    w_ids, w_f, w_loss = w_ids[keep], w_f[keep], w_loss[keep]
                    limit, force_pos = limit[keep], force_pos[keep]
                    interrupted, saw_marker = interrupted[keep], saw_marker[keep]
                    cache.select(keep)
            if weight_sync is not None and n % sync_every == 0:
                new = weight_sync()
                if new is not None:
                    version = new
            s = cache.length
            if not shared:
                cache.key_mask[:, s] = True
            if decode_step is not None:
                logits = decode_step(tok, cache)
            else:
                logits = model(tok[:, None], cache.key_mask[:, : s + 1], cache)[:, -1]
            if on_step is not None:
                on_step(1)

        release = getattr(cache, "release", None)  # a pooled cache's buffers serve the next call
        if release is not None:
            release()
        width = int(out_len.max()) if B else 0
    out_ids, out_f, out_loss, out_len = (t.clone() for t in (out_ids, out_f, out_loss, out_len))  # normal tensors
    if repeats is not None:  # the output's prompt rows, one per sample
        prompt_ids, prompt_mask = prompt_ids.repeat_interleave(repeats, 0), prompt_mask.repeat_interleave(repeats, 0)
    cmask = torch.arange(width, device=dev)[None, :] < out_len[:, None]
    f = out_f[:, :width] * cmask[..., None]
    return RolloutBatch(
        prompt_ids=prompt_ids,
        prompt_mask=prompt_mask,
        completion_ids=out_ids[:, :width],
        completion_mask=cmask,
        loss_mask=out_loss[:, :width] & cmask,
        behaviour_logp=f[..., 0],
        entropy=f[..., 1],
        versions=torch.tensor(step_version[:width], dtype=torch.long, device=dev).repeat(B, 1) * cmask,
        finish_reason=reason,
        self_certainty=f[..., 2] if p.self_certainty else None,
        top2_margin=f[..., 3] if p.self_certainty else None,
    )
