"""Sampling a model for evaluation, and scoring texts under another model.

Rows follow the ``samples.jsonl`` schema (see :mod:`rlvr.eval.samples`), with
``prompt`` added so that any model can re-score them (perplexity under the base).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from rlvr.config import SamplingConfig
from rlvr.log import Progress
from rlvr.model.io import load_policy, model_device
from rlvr.model.logprobs import completion_logits, token_logprobs
from rlvr.rewards.verify import verify_all
from rlvr.rollout.budget import rows_for
from rlvr.rollout.engine import sample, sample_params
from rlvr.tasks.environment import environments_for
from rlvr.types import RolloutBatch


def samples_for(model, tok, task, problems, n: int, sampling: SamplingConfig, seed: int,
                batch_size: int | None = None, progress: str = "none", desc: str = "sample") -> list[dict]:
    """n completions per problem -> samples.jsonl rows (verified). ``batch_size``: rows sampled at
    once (default: as many as memory allows, :func:`rlvr.rollout.budget.rows_for`); each problem's
    prompt is prefilled once for its samples in a batch. ``progress``: a :class:`rlvr.log.Progress`
    mode for a display of the decoding steps, named ``desc`` (none by default)."""
    params = sample_params(sampling, tok)
    gen = torch.Generator().manual_seed(seed)
    rows_p = [p for p in problems for _ in range(n)]
    t_new = params.max_new_tokens + (len(params.interruption_ids) + params.interruption_extra
                                     if params.interruption_budget else 0)
    if batch_size is None:
        t_prompt = tok.batch_encode_left([p.prompt for p in problems])[0].shape[1] if problems else 0
        batch_size = rows_for(model, t_prompt + t_new)
    steps = math.ceil(len(rows_p) / batch_size) * t_new  # every batch reports its whole step budget
    bar = Progress(steps, desc, progress, every=max(1, steps // 10), unit="decoding steps")
    try:
        rb = sample(model, tok, [p.prompt for p in rows_p], params, generator=gen, batch_size=batch_size,
                    environments=environments_for(task, rows_p, params), problems=rows_p,
                    on_step=bar.update)
    finally:
        bar.close()
    verdicts = verify_all(task, rb.texts, rows_p)
    return rows_from(rb, verdicts, rows_p, getattr(task, "name", ""))


def rows_from(rb: RolloutBatch, verdicts, problems, task_name: str) -> list[dict]:
    n_tok = rb.policy_lengths.tolist()  # the policy's tokens (a tool task's observations are not)
    logp_sum = (rb.behaviour_logp * rb.policy_mask).sum(-1).tolist()
    ent_sum = (rb.entropy * rb.policy_mask).sum(-1).tolist()
    out = []
    for i, (v, p) in enumerate(zip(verdicts, problems)):
        k = max(1, n_tok[i])
        out.append({
            "problem_id": p.id, "prompt": p.prompt, "completion": rb.texts[i],
            "answer": v.answer if v.status in ("right", "wrong") else None, "reward": float(v.reward),
            "correct": bool(v.correct), "status": v.status, "num_tokens": int(n_tok[i]),
            "mean_logp": logp_sum[i] / k, "mean_entropy": ent_sum[i] / k,
            "finish_reason": rb.finish_reason[i], "task": task_name,
        })
        if rb.episodes is not None:  # a tool task's episode: its environment tokens and tool calls
            e = rb.episodes[i]
            out[-1].update(turns=e.turns, tool_calls=e.tool_calls, failed_calls=e.failed_calls,
                           env_tokens=e.env_tokens)
    return out


def encode_pairs(tok, prompts: list[str], completions: list[str]):
    """-> (prompt ids (B, Tp) left-padded, their mask, completion ids (B, T) right-padded with pad_id,
    their mask), T the longest completion (at least 1)."""
    ids_p, mask_p = tok.batch_encode_left(prompts)
    comp = [tok.encode(c) for c in completions]
    width = max(1, max(len(c) for c in comp))
    ids_c = torch.full((len(comp), width), tok.pad_id, dtype=torch.long)
    mask_c = torch.zeros((len(comp), width), dtype=torch.bool)
    for i, c in enumerate(comp):
        ids_c[i, : len(c)] = torch.tensor(c, dtype=torch.long)
        mask_c[i, : len(c)] = True
    return ids_p, mask_p, ids_c, mask_c


@torch.no_grad()
def mean_logp_under(model, tok, prompts: list[str], completions: list[str], batch_size: int = 256,
                    on_batch: Callable[[int], None] | None = None) -> list[float]:
    """Per text, (1/T) sum_t log P_model(y_t | x, y_<t) of the completion (EOS excluded).
    ``on_batch(rows)`` after each batch (progress display)."""
    model.eval()
    out: list[float] = []
    for s in range(0, len(prompts), batch_size):
        ids_p, mask_p, ids_c, mask_c = encode_pairs(tok, prompts[s : s + batch_size], completions[s : s + batch_size])
        dev = model_device(model)
        ids, mask = torch.cat([ids_p, ids_c], 1).to(dev), torch.cat([mask_p, mask_c], 1).to(dev)
        logp, _ = token_logprobs(completion_logits(model, ids, mask, ids_p.shape[1]), ids_c.to(dev))
        n = mask_c.sum(-1).clamp(min=1)
        out.extend(((logp.cpu() * mask_c).sum(-1) / n).tolist())
        if on_batch is not None:
            on_batch(len(ids_c))
    return out


def perplexity_stats(mean_logps: list[float]) -> dict:
    """Summary of per-sample perplexities exp(-mean logp): mean, median, quartiles."""
    import numpy as np

    ppl = np.exp(-np.asarray(mean_logps, dtype=np.float64))
    if ppl.size == 0:
        return {"count": 0}
    q = np.quantile(ppl, [0.25, 0.5, 0.75])
    return {"count": int(ppl.size), "mean": float(ppl.mean()), "p25": float(q[0]), "median": float(q[1]),
            "p75": float(q[2]), "mean_logp": float(np.mean(mean_logps)),
            "histogram": np.histogram(np.log(ppl), bins=10)[0].tolist()}


def perplexity_of_rows(model, tok, rows: list[dict], on_batch: Callable[[int], None] | None = None) -> dict:
    """Perplexity under ``model`` of each row's completion (rows need ``prompt``); ``on_batch``: as
    :func:`mean_logp_under`'s."""
    if not rows or "prompt" not in rows[0]:
        return {"count": 0, "note": "rows have no 'prompt' field; perplexity needs the prompts"}
    lp = mean_logp_under(model, tok, [r["prompt"] for r in rows], [r["completion"] for r in rows],
                         on_batch=on_batch)
    return perplexity_stats([x for x in lp if math.isfinite(x)])


def perplexity_under(base_checkpoint: str, rows: list[dict]) -> dict:
    model, tok = load_policy(base_checkpoint, device="auto")
    return perplexity_of_rows(model, tok, rows)


def mean_kl_under(model, ref, tok, prompts: list[str], completions: list[str], batch_size: int = 128) -> list[float]:
    """Per text, (1/T) sum_t KL(pi_model(. | x, y_<t) || pi_ref(. | x, y_<t)) over the T completion
    tokens (EOS excluded), exact over the vocabulary: logits (B, T, V) of both models at the same
    positions, log-softmax in float32. ``completions`` are normally the model's own samples, so the
    mean is a Monte Carlo estimate of the per-token KL of the model to ``ref`` on those prompts."""
    model.eval()
    ref.eval()
    out: list[float] = []
    for s in range(0, len(prompts), batch_size):
        ids_p, mask_p, ids_c, mask_c = encode_pairs(tok, prompts[s : s + batch_size], completions[s : s + batch_size])
        ids, mask = torch.cat([ids_p, ids_c], 1), torch.cat([mask_p, mask_c], 1)
        with torch.no_grad():
            lp = torch.log_softmax(completion_logits(model, ids.to(model_device(model)), mask.to(model_device(model)),
                                                     ids_p.shape[1]).float().cpu(), -1)  # (B, T, V)
            lq = torch.log_softmax(completion_logits(ref, ids.to(model_device(ref)), mask.to(model_device(ref)),
                                                     ids_p.shape[1]).float().cpu(), -1)
            kl = (lp.exp() * (lp - lq)).sum(-1)  # (B, T)
        n = mask_c.sum(-1).clamp(min=1)
        out.extend(((kl * mask_c).sum(-1) / n).tolist())
    return out
