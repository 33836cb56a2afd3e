"""The bf16 probe: how fast bf16 autocast runs against float32 on this CPU, at a model's own shapes,
measured once per machine and cached (what ``model.dtype: auto`` decides by: :mod:`rlvr.model.precision`).

:func:`measure` times a forward + backward, then decoding, alternating float32 and bf16, repeated,
medians. The tiny model is measured for real (one block, with attention, norms and the LM head) at
the default RL step's shapes: one of its two mini-batches (8 prompts x 8 samples), sampled by the
sampler's shared-prefix decoding and trained on as 64 left-padded sequences of prompt + completion
under their key mask; an HF model as its layer's projections (q, k, v, o, gate, up, down) at a
training-sized token count and 64-row decode steps. :func:`measured` caches the result in
``<cache>/machine/bf16-<key>.json``, keyed by a hash of the CPU (model name, family, model, flags),
the torch version, the torch thread count and the workload; a second run reuses it, a corrupt file
is measured again. The 1-minute load average is recorded with it (:func:`busy_note` says when the
machine was busy: the ratio may then be off; delete the file to measure again).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

from rlvr.config import ModelConfig
from rlvr.log import warn
from rlvr.machine import cpu_info
from rlvr.model.tiny import TinyGPT
from rlvr.model.tokenizer import CharTokenizer
from rlvr.paths import atomic_write, cache_root

FORMAT = 2  # bump when the measurement changes: old cache files are then measured again
TRAIN_TOKENS = 2048  # the most tokens of the training-sized forward + backward (HF projections)
DECODE_ROWS = 64  # rows of a decode-sized batch (one new token each; HF projections)
RL_PROMPTS, RL_ROWS = 8, 64  # the tiny model's workload: a mini-batch of the default RL step (16 x 8 in 2),
RL_PROMPT_TOKENS, RL_NEW_TOKENS = 10, 32  # its prompts of about 10 tokens, completions of about 30
FLOP_CAP = 2e9  # float32 FLOPs of one repeat's forward + backward at most: a large model uses fewer tokens
TINY_FLOP_CAP = 4e9  # the same for the tiny model's RL-step workload (the default model: 64 rows fit)
BUDGET_S = 0.8  # stop repeating after this long (3 repeats at least): the measurement stays < 2 s


# ----------------------------------------------------------------------------- what is measured
def tiny_spec(cfg: ModelConfig) -> dict:
    """The workload of a tiny model: one block of it, built for real (attention, norms, LM head)."""
    return {"kind": "tiny", "d_model": cfg.d_model, "n_head": cfg.n_head, "mlp": cfg.mlp,
            "context": cfg.context, "fp32_logits": cfg.fp32_logits}


def hf_spec(conf: dict) -> dict | None:
    """The workload of an HF model: one decoder layer's projections (q, k, v, o, gate, up, down) from
    its ``config.json``; None when the config names no hidden size."""
    h = conf.get("hidden_size") or conf.get("n_embd") or conf.get("d_model")
    if not h:
        return None
    n = conf.get("num_attention_heads") or conf.get("n_head") or 1
    kv = conf.get("num_key_value_heads") or n
    hd = conf.get("head_dim") or h // n
    i = conf.get("intermediate_size") or conf.get("n_inner") or 4 * h
    shapes = [(h, n * hd), (h, kv * hd), (h, kv * hd), (n * hd, h), (h, i), (h, i), (i, h)]
    return {"kind": "linear", "shapes": [[int(a), int(b)] for a, b in shapes]}


# ----------------------------------------------------------------------------- measurement
Run = Callable[[bool], tuple[float, float]]  # bf16 -> (train seconds, decode seconds) of one repeat


def _tokens(flops_per_token: float, cap: float) -> int:
    """The training-sized token count: :data:`TRAIN_TOKENS`, fewer where the float32 forward +
    backward of one repeat would exceed ``cap`` FLOPs (a multiple of 16, at least 16)."""
    return max(16, min(TRAIN_TOKENS, int(cap / flops_per_token) // 16 * 16))


def _tiny_run(spec: dict, g: torch.Generator, scale: float) -> tuple[Run, dict]:
    """One real tiny block (+ embedding, final norm, LM head) at the RL step's shapes: forward +
    backward of :data:`RL_ROWS` left-padded sequences of prompt + completion under their key mask,
    then the sampler's decoding (:data:`RL_PROMPTS` prompts prefilled once, :data:`RL_ROWS` rows
    decoding :data:`RL_NEW_TOKENS` steps from the shared prefix). Fewer rows where the float32
    forward + backward would exceed ``scale`` x :data:`TINY_FLOP_CAP` FLOPs (a wide model)."""
    cfg = ModelConfig(n_layer=1, d_model=spec["d_model"], n_head=spec["n_head"], mlp=spec["mlp"],
                      context=spec["context"], fp32_logits=spec["fp32_logits"])
    vocab = CharTokenizer().vocab_size
    with torch.random.fork_rng(devices=[]):  # the init draws from the global RNG: leave it as it was
        torch.manual_seed(0)
        model = TinyGPT(cfg, vocab)
    tp = min(RL_PROMPT_TOKENS, max(1, cfg.context // 4))
    new = max(1, min(RL_NEW_TOKENS, cfg.context - tp))
    T = tp + new
    fit = max(1, min(RL_ROWS, int(scale * TINY_FLOP_CAP / (3 * model.flops_per_token() * T))))  # rows
    prompts = min(RL_PROMPTS, fit)
    per_prompt = fit // prompts
    rows = prompts * per_prompt
    ids = torch.randint(0, vocab, (rows, T), generator=g)
    key_mask = torch.ones(rows, T, dtype=torch.bool)
    pad = torch.randint(0, max(1, tp // 3) + 1, (prompts,), generator=g)  # left padding of each prompt
    prompt_mask = torch.arange(tp)[None, :] >= pad[:, None]
    key_mask[:, :tp] = prompt_mask.repeat_interleave(per_prompt, 0)
    prompt_ids = torch.randint(0, vocab, (prompts, tp), generator=g)
    repeats = torch.full((prompts,), per_prompt)
    tok = torch.randint(0, vocab, (rows,), generator=g)

    def run(bf16: bool) -> tuple[float, float]:
        model.set_dtype("bfloat16" if bf16 else "float32")
        model.zero_grad(set_to_none=True)
        t0 = time.perf_counter()
        model(ids, key_mask).logsumexp(-1).mean().backward()
        t1 = time.perf_counter()
        with torch.no_grad():
            cache, _ = model.prefill_shared(prompt_ids, prompt_mask, repeats, new)
            for _ in range(new):
                model.decode_shared(tok, cache)
        return t1 - t0, time.perf_counter() - t1

    return run, {"train_tokens": int(key_mask.sum()), "decode_rows": rows, "decode_steps": new}


def _linear_run(spec: dict, g: torch.Generator, scale: float) -> tuple[Run, dict]:
    """Every projection of one layer: forward + backward at a training-sized token count (inputs
    float32, as from a norm), then decode-sized forwards of 64 rows (autocast entered per step)."""
    shapes = [tuple(s) for s in spec["shapes"]]
    n = _tokens(6 * sum(a * b for a, b in shapes), scale * FLOP_CAP)
    rows = min(DECODE_ROWS, n)
    steps = max(1, n // rows)  # as many tokens sampled as trained on

    def rand(*size, grad=False):
        return torch.randn(*size, generator=g).mul_(0.05).requires_grad_(grad)

    ws = [rand(o, i, grad=True) for i, o in shapes]
    xs = [rand(n, i, grad=True) for i, _ in shapes]
    decs = [rand(rows, i) for i, _ in shapes]

    def run(bf16: bool) -> tuple[float, float]:
        for t in (*ws, *xs):
            t.grad = None
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):  # one region: weights cast once
            loss = torch.stack([F.linear(x, w).sum().float() for x, w in zip(xs, ws)]).sum()
        loss.backward()
        t1 = time.perf_counter()
        with torch.no_grad():
            for _ in range(steps):  # the sampler enters autocast once per decode step
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                    for x, w in zip(decs, ws):
                        F.linear(x, w)
        return t1 - t0, time.perf_counter() - t1

    return run, {"train_tokens": n, "decode_rows": rows, "decode_steps": steps}


def measure(spec: dict) -> dict:
    """Time bf16 autocast against float32 on the CPU for the workload ``spec`` (:func:`tiny_spec`:
    a real one-block tiny model at the RL step's shapes, :func:`_tiny_run`; :func:`hf_spec`: one
    layer's projections, :func:`_linear_run`): per repeat a forward + backward, then the decoding of
    about as many tokens. float32 and bf16 alternate after a small warm-up; 3 to 7 repeats (about
    :data:`BUDGET_S`), medians; one only when bf16 is more than 4x slower in it (decided, and slow).

    Returns {"ratio", "train_ratio", "decode_ratio"} (float32 seconds / bf16 seconds: > 1 means bf16
    is faster), "fp32_s", "bf16_s", "repeats", and the token counts. torch's global RNG and thread
    count are left as they were."""
    g = torch.Generator().manual_seed(0)
    build = _tiny_run if spec["kind"] == "tiny" else _linear_run
    warm, _ = build(spec, g, 1 / 8)
    for bf16 in (False, True):  # warm-up, small: thread pool, kernels compiled (first bf16 calls are slow)
        warm(bf16)
    run, sizes = build(spec, g, 1.0)
    times: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    start = time.perf_counter()
    for r in range(7):
        for bf16 in (False, True):
            times[bf16].append(run(bf16))
        if r == 0 and sum(times[True][0]) > 4 * sum(times[False][0]):  # no bf16 units: decided, and slow
            break
        if r >= 2 and time.perf_counter() - start > BUDGET_S:
            break

    def med(bf16: bool, part: int | None) -> float:
        return statistics.median(t[0] + t[1] if part is None else t[part] for t in times[bf16])

    def ratio(part: int | None) -> float:
        return med(False, part) / max(med(True, part), 1e-9)

    return {"ratio": ratio(None), "train_ratio": ratio(0), "decode_ratio": ratio(1), **sizes,
            "repeats": len(times[False]), "fp32_s": med(False, None), "bf16_s": med(True, None)}


def cache_key(spec: dict) -> dict:
    """What a measurement depends on: the CPU, the torch version and threads, the workload."""
    cpu = cpu_info()
    return {"format": FORMAT, "cpu": cpu["model_name"], "family": cpu["family"], "model": cpu["model"],
            "flags": cpu["flags"], "torch": torch.__version__, "threads": torch.get_num_threads(),
            "workload": spec}


def cache_path(key: dict) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return cache_root() / "machine" / f"bf16-{digest}.json"


def _read_cached(path: Path, key: dict) -> dict | None:
    """The cached measurement at ``path`` if it is whole and for ``key``; None if absent; a corrupt
    file is reported and None returned (so it is measured again)."""
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
        ratio = float(data["ratio"])
        if data.get("key") != key or not math.isfinite(ratio) or ratio <= 0:
            raise ValueError("not a measurement for this machine")
        return data
    except (OSError, ValueError, TypeError, KeyError) as e:
        warn(f"{path}: unreadable precision measurement ({e}); measuring again")
        return None


def measured(spec: dict) -> tuple[dict, Path]:
    """(measurement, cache file) of the workload ``spec`` on this CPU: from the cache, else
    measured (:func:`measure`) and written there (atomically)."""
    key = cache_key(spec)
    path = cache_path(key)
    data = _read_cached(path, key)
    if data is None:
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None  # before this process measures
        data = {**measure(spec), "measured": _dt.datetime.now().isoformat(timespec="seconds"), "key": key,
                "load": load, "cores": os.cpu_count()}
        try:
            atomic_write(path, json.dumps(data, indent=1))
        except OSError as e:  # a read-only cache costs a measurement per run, nothing else
            warn(f"could not cache the precision measurement in {path} ({e.strerror or e})")
    return data, path


def busy_note(data: dict) -> str:
    """``" on a busy machine (load 2.3, 2 cores: the ratio may be off)"`` when other work shared the
    cores while measuring (the 1-minute load average plus the measuring threads above the core
    count), else ``""``; delete the cache file to measure again on a quiet machine."""
    load, cores = data.get("load"), data.get("cores")
    threads = data.get("key", {}).get("threads", 1)
    if not isinstance(load, (int, float)) or not isinstance(cores, int) or load + threads <= cores + 0.5:
        return ""
    return f" on a busy machine (load {load:.1f}, {cores} cores: the ratio may be off)"
