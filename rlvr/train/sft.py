"""Supervised fine-tuning on (prompt, completion) pairs, and the data of the three SFT flavours.

* ``sft``: one gold solution per problem (``problem.solutions[0]``);
* ``sft_gold``: every gold solution of every problem (``problem.solutions``);
* ``distill``: completions sampled from a stronger teacher, kept only when the task's verifier
  says they are right (:func:`distill_pairs`).

The loss is the next-token negative log-likelihood of the completion tokens (and the EOS after
them) only: prompt tokens are inputs, never targets. Sequences are built exactly as the RL
trainer builds them (left-padded prompt + right-padded completion + EOS), and scored with the
same :func:`rlvr.model.logprobs.completion_logits` / :func:`token_logprobs`.

Shapes: B pairs, Tp prompt tokens (left-padded), T completion tokens (right-padded), V vocab.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator

import torch

from rlvr.errors import UserError
from rlvr.eval.generate import samples_for
from rlvr.model.logprobs import completion_logits, token_logprobs

SFT_MODES = ("sft", "sft_gold")
Pair = tuple[str, str]
NO_PAIRS = "no SFT pairs to train on; check the task has gold solutions (or the teacher got any right)"


def sft_pairs(problems: list, mode: str) -> list[Pair]:
    """(prompt, completion) pairs: ``sft`` = the first gold solution of each problem,
    ``sft_gold`` = all of them. Problems without solutions are skipped."""
    if mode not in SFT_MODES:
        raise UserError(f"unknown SFT data {mode!r}; use one of {', '.join(SFT_MODES)}")
    if mode == "sft":
        return [(p.prompt, p.solutions[0]) for p in problems if p.solutions]
    return [(p.prompt, s) for p in problems for s in p.solutions]


def encode_pairs(tok, pairs: list[Pair]) -> tuple:
    """-> ids (B, Tp + T), key_mask (B, Tp + T), targets (B, T), target_mask (B, T), Tp.

    Prompt: BOS + prompt, left-padded. Completion: completion + EOS, right-padded.
    """
    ids_p, mask_p = tok.batch_encode_left([p for p, _ in pairs])
    comp = [list(tok.encode(c)) + [tok.eos_id] for _, c in pairs]
    width = max(len(c) for c in comp)
    ids_c = torch.full((len(comp), width), tok.pad_id, dtype=torch.long)
    mask_c = torch.zeros((len(comp), width), dtype=torch.bool)
    for i, c in enumerate(comp):
        ids_c[i, : len(c)] = torch.tensor(c, dtype=torch.long)
        mask_c[i, : len(c)] = True
    return torch.cat([ids_p, ids_c], 1), torch.cat([mask_p, mask_c], 1), ids_c, mask_c, ids_p.shape[1]


def sft_loss(model, tok, pairs: list[Pair]) -> torch.Tensor:
    """Token-mean NLL of the completion tokens (+ EOS) given the prompt: scalar, differentiable.

    Only the logits at completion positions are computed, so prompt positions carry no loss and
    no gradient reaches the model through them (they still act as context).
    """
    if not pairs:
        raise UserError(NO_PAIRS)
    ids, key_mask, targets, target_mask, tp = encode_pairs(tok, pairs)
    logp, _ = token_logprobs(completion_logits(model, ids, key_mask, tp), targets)
    m = target_mask.to(logp.dtype)
    return -(logp * m).sum() / m.sum().clamp(min=1)


def batches(pairs: list[Pair], batch_size: int, seed: int) -> Iterator[list[Pair]]:
    """Endless seeded epochs over ``pairs``, ``batch_size`` at a time (reshuffled every epoch)."""
    if not pairs:
        raise UserError(NO_PAIRS)
    rng = random.Random(seed)
    order: list[int] = []
    while True:
        out = []
        while len(out) < batch_size:
            if not order:
                order = list(range(len(pairs)))
                rng.shuffle(order)
            out.append(pairs[order.pop()])
        yield out


def sft_optimizer(model, lr: float, betas: tuple[float, float] = (0.9, 0.99),
                  weight_decay: float = 0.0) -> torch.optim.Optimizer:
    return torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr, betas=betas,
                             weight_decay=weight_decay)


def sft_update(model, tok, batch: list[Pair], opt: torch.optim.Optimizer, grad_clip: float = 1.0) -> dict:
    """One optimiser step of SFT on ``batch`` -> {"sft_loss", "grad_norm"} (step skipped if non-finite)."""
    model.train()
    opt.zero_grad(set_to_none=True)
    loss = sft_loss(model, tok, batch)
    loss.backward()
    params = [p for p in model.parameters() if p.requires_grad]
    norm = float(torch.nn.utils.clip_grad_norm_(params, grad_clip or float("inf")))
    if math.isfinite(norm):
        opt.step()
    opt.zero_grad(set_to_none=True)
    return {"sft_loss": float(loss.detach()), "grad_norm": norm}


def sft_train(model, tok, pairs: list[Pair], steps: int, batch_size: int, lr: float, seed: int,
              grad_clip: float = 1.0, betas: tuple[float, float] = (0.9, 0.99)) -> list[dict]:
    """``steps`` AdamW steps of SFT (constant lr) on seeded batches of ``pairs``; one metrics dict
    per step: step, sft_loss, grad_norm, sequences (cumulative pairs), tokens (cumulative)."""
    torch.manual_seed(seed)
    opt = sft_optimizer(model, lr, betas)
    it = batches(pairs, batch_size, seed)
    out, seqs, tokens = [], 0, 0
    for step in range(1, steps + 1):
        batch = next(it)
        m = sft_update(model, tok, batch, opt, grad_clip)
        seqs += len(batch)
        tokens += int(tok.batch_encode_left([p for p, _ in batch])[1].sum())  # prompts as the model sees them
        tokens += sum(len(tok.encode(c)) + 1 for _, c in batch)  # completions + EOS
        out.append({"step": step, **m, "sequences": seqs, "tokens": tokens, "lr": lr})
    return out


def keep_correct(rows: list[tuple[str, str, bool]]) -> list[Pair]:
    """(prompt, completion, correct) triples -> the (prompt, completion) pairs that are correct."""
    return [(p, c) for p, c, ok in rows if ok]


def distill_pairs(teacher, tok, task, problems: list, n: int, sampling, seed: int) -> tuple[list[Pair], dict]:
    """Sample ``n`` completions per problem from ``teacher`` (SamplingConfig ``sampling``), verify
    each with ``task.verify`` and keep the right ones -> (pairs, {"generated", "kept"})."""
    rows = samples_for(teacher, tok, task, problems, n, sampling, seed)
    pairs = keep_correct([(r["prompt"], r["completion"], r["correct"]) for r in rows])
    return pairs, {"generated": len(rows), "kept": len(pairs)}
