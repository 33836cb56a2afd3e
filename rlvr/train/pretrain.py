"""Pretraining the tiny base model from scratch on the synthetic corpus.

Documents (task problems with worked solutions, a share of them wrong or
truncated, plus plain text) are tokenised as BOS + text + EOS, concatenated, and
cut into random windows of ``seq_len + 1`` tokens. Checkpoints are kept at token
milestones (fractions of the budget) so RL can start from any of them. The
result is cached by config hash: ``base_model(cfg)`` trains once, then reuses.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import torch

from rlvr.config import ModelConfig, PretrainConfig, config_hash, to_dict
from rlvr.errors import UserError
from rlvr.log import MetricsLog, Progress
from rlvr.machine import machine_info
from rlvr.model.io import save_policy
from rlvr.model.tiny import TinyGPT
from rlvr.model.tokenizer import CharTokenizer
from rlvr.paths import atomic_write, cache_root, replace_dir
from rlvr.tasks.corpus import build_corpus
from rlvr.tasks.registry import get_task
from rlvr.train.schedule import lr_at


def pretrain_key(model_cfg: ModelConfig, pre: PretrainConfig) -> str:
    model = to_dict(model_cfg)
    if not model.get("chat_template_kwargs"):  # HF-only, added later: cached bases keep their keys
        model.pop("chat_template_kwargs", None)
    return config_hash({"model": model, "pretrain": to_dict(pre), "format": 1})


def build_token_stream(pre: PretrainConfig, tok: CharTokenizer) -> torch.Tensor:
    """(N,) long: the whole corpus as one token stream."""
    mix = [(get_task(name, **pre.task_knobs.get(name, {})), w) for name, w in pre.mix.items()]
    mean_len = 48  # rough characters per document; the corpus is sampled with replacement anyway
    n_docs = max(2000, min(60_000, pre.tokens // mean_len // 2))
    docs = build_corpus(mix, n_docs, pre.wrong_frac, pre.truncated_frac, pre.seed)
    ids: list[int] = []
    for d in docs:
        ids.extend(tok.encode(d, bos=True, eos=True))
    return torch.tensor(ids, dtype=torch.long)


def pretrain(model_cfg: ModelConfig, pre: PretrainConfig, out_dir: str | Path, progress: str = "auto") -> Path:
    """Train from scratch; write ``milestone_<frac>/`` checkpoints, ``final/`` and ``metrics.jsonl``.

    Returns the ``final`` checkpoint directory.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(pre.seed)
    gen = torch.Generator().manual_seed(pre.seed)
    tok = CharTokenizer()
    model = TinyGPT(model_cfg, tok.vocab_size)
    stream = build_token_stream(pre, tok)
    seq = min(pre.seq_len, model_cfg.context)
    per_step = pre.batch_size * seq
    total = max(1, pre.tokens // per_step)
    milestone_frac = {max(1, round(m * total)): m for m in pre.milestones} | {total: 1.0}
    milestones = sorted(milestone_frac)
    decay, no_decay = [], []
    for p in model.parameters():
        (decay if p.dim() >= 2 else no_decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=pre.lr, betas=(0.9, 0.95), fused=False)
    log = MetricsLog(out)
    bar = Progress(total, "pretrain", progress, every=max(1, total // 20))
    fpt = model.flops_per_token()
    t0, tokens = time.time(), 0
    window = torch.arange(seq + 1)
    for step in range(total):
        starts = torch.randint(0, len(stream) - seq - 1, (pre.batch_size,), generator=gen)
        batch = stream[starts[:, None] + window]  # (batch, seq + 1) random windows of the stream
        x, y = batch[:, :-1], batch[:, 1:]
        for g in opt.param_groups:
            g["lr"] = lr_at(step, pre.lr, pre.warmup_steps, total, "cosine")
        logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        tokens += per_step
        if (step + 1) % 10 == 0 or step + 1 in milestones:
            row = log.write({"step": step + 1, "tokens": tokens, "loss": loss, "lr": opt.param_groups[0]["lr"],
                             "wall_s": time.time() - t0, "flops": 3 * fpt * tokens})
            bar.update(0, **row)
        bar.update(1)
        if step + 1 in milestones:
            save_policy(model, tok, out / f"milestone_{milestone_frac[step + 1]:.2f}")
    bar.close()
    log.close()
    shutil.copytree(out / "milestone_1.00", out / "final", dirs_exist_ok=True)
    atomic_write(out / "pretrain.json", json.dumps({
        "model": to_dict(model_cfg), "pretrain": to_dict(pre), "params": model.num_params(),
        "steps": total, "tokens": tokens, "wall_s": time.time() - t0, "milestones": milestones,
        "machine": machine_info("bfloat16" if model_cfg.dtype == "bfloat16" else "float32")}, indent=1))
    return out / "final"


def base_path(model_cfg: ModelConfig, pre: PretrainConfig) -> Path:
    """Where the cache holds (or would hold) the ``final`` base checkpoint of this (model, pretrain)
    config, whether or not it is there."""
    return cache_root() / "base" / pretrain_key(model_cfg.with_dtype("float32"), pre) / "final"


def cached_base(model_cfg: ModelConfig, pre: PretrainConfig) -> Path | None:
    """The cached base checkpoint of this (model, pretrain) config if it exists, else None."""
    final = base_path(model_cfg, pre)
    return final if (final / "model.safetensors").exists() and (final.parent / "pretrain.json").exists() else None


def milestone_name(base: str | Path, fraction: float) -> Path:
    """The checkpoint a pretraining run saves at ``fraction`` of its budget (``base``: its ``final``
    checkpoint; 1.0 -> ``base`` itself), whether or not it is there."""
    base = Path(base)
    return base if fraction == 1.0 else base.parent / f"milestone_{fraction:.2f}"


def milestone_path(base: str | Path, fraction: float) -> Path:
    """The checkpoint a pretraining run saved at ``fraction`` of its budget (``base``: its ``final``
    checkpoint, as :func:`base_model` returns it; 1.0 -> ``base`` itself); an error naming the
    milestones it has when that one is missing."""
    base = Path(base)
    if fraction == 1.0:
        return base
    d = milestone_name(base, fraction)
    if not (d / "model.safetensors").exists():
        have = sorted(float(p.name.split("_")[1]) for p in base.parent.glob("milestone_*"))
        raise UserError(f"the base at {base.parent} has no pretraining milestone {fraction:.2f} (it has "
                        f"{', '.join(f'{h:.2f}' for h in have) or 'none'}); add it to pretrain.milestones "
                        "(this pretrains a new base) or pick one of those")
    return d


def base_model(model_cfg: ModelConfig, pre: PretrainConfig, progress: str = "auto") -> Path:
    """The cached base checkpoint for this (model, pretrain) config, pretrained on first use."""
    model_cfg = model_cfg.with_dtype("float32")  # pretraining (and its cache key) stays float32 whatever model.dtype
    d = base_path(model_cfg, pre).parent
    if (found := cached_base(model_cfg, pre)) is not None:
        return found
    tmp = d.with_name(d.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    pretrain(model_cfg, pre, tmp, progress)
    replace_dir(tmp, d)
    return d / "final"
