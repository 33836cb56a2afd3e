"""The bf16 probe: how fast bf16 autocast runs against float32 on this CPU, at a model's own shapes,
measured once per machine and cached (what ``model.dtype: auto`` decides by: :mod:`rlvr.model.precision`;
the cache, the busy-machine rule and the re-validation by real steps: :mod:`rlvr.model.precision_cache`).

:func:`measure` times one RL step's work, alternating float32 and bf16, repeated, medians. The tiny
model is measured as the step runs it (:func:`_tiny_run`): the whole model (every layer), the
sampler's shared-prefix decoding of every row, then the update: forward + backward of the same rows
in :data:`MINIBATCHES` mini-batches, each followed by an AdamW step on the float32 master weights,
at the shapes of the tiny recipe's benchmark step (64 prompts x 8 samples) scaled down to
:data:`STEP_PROMPTS` prompts x :data:`STEP_GROUP` samples (fewer prompts where the float32 update
would exceed the FLOP cap): the same rows decoded and trained on, as in the step. So
decoding and training weigh what they weigh in a real step. An HF model is measured as its layer's
projections (q, k, v, o, gate, up, down) at a training-sized token count and 64-row decode steps.
:func:`measured` caches the result; a measurement on a busy machine is refused (not taken, never
cached: ``auto`` then runs float32 and says why).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

from rlvr.config import ModelConfig
from rlvr.model.precision_cache import busy_reason, cache_key, cache_path, now, read_cached, write
from rlvr.model.tiny import TinyGPT
from rlvr.model.tokenizer import CharTokenizer

TRAIN_TOKENS = 2048  # the most tokens of the training-sized forward + backward (HF projections)
DECODE_ROWS = 64  # rows of a decode-sized batch (one new token each; HF projections)
STEP_PROMPTS, STEP_GROUP = 8, 8  # the benchmark step's 64 prompts x 8 samples, scaled to 8 prompts (time)
RL_PROMPT_TOKENS, RL_NEW_TOKENS = 10, 32  # its prompts of about 10 tokens, completions of about 30
MINIBATCHES = 2  # optimiser updates per step (algo.minibatches)
FLOP_CAP = 2e9  # float32 FLOPs of one repeat's forward + backward at most: a large model uses fewer tokens
TINY_FLOP_CAP = 8e9  # the same for the tiny model's step (the default model: 4 prompts x 8 samples)
BUDGET_S = 0.8  # stop repeating after this long (3 repeats at least)
SPREAD_MAX = 0.5  # float32 repeats spreading more than this ((max - min) / median): busy while measuring


# ----------------------------------------------------------------------------- what is measured
def tiny_spec(cfg: ModelConfig) -> dict:
    """The workload of a tiny model: the whole model, built for real (every layer, norms, LM head)."""
    return {"kind": "tiny", "n_layer": cfg.n_layer, "d_model": cfg.d_model, "n_head": cfg.n_head, "mlp": cfg.mlp,
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
    """The tiny model's RL step (every layer, embedding, norms, LM head): the sampler's decoding
    (prompts prefilled once, every row decoding :data:`RL_NEW_TOKENS` steps from its shared prefix),
    then forward + backward of the same rows (left-padded prompt + completion under their key mask) in
    :data:`MINIBATCHES` mini-batches, each followed by an AdamW step. :data:`STEP_PROMPTS` x
    :data:`STEP_GROUP` rows, fewer prompts where the float32 forward + backward would exceed
    ``scale`` x :data:`TINY_FLOP_CAP` FLOPs."""
    cfg = ModelConfig(n_layer=spec.get("n_layer", 1), d_model=spec["d_model"], n_head=spec["n_head"],
                      mlp=spec["mlp"], context=spec["context"], fp32_logits=spec["fp32_logits"])
    vocab = CharTokenizer().vocab_size
    with torch.random.fork_rng(devices=[]):  # the init draws from the global RNG: leave it as it was
        torch.manual_seed(0)
        model = TinyGPT(cfg, vocab)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6)
    tp = min(RL_PROMPT_TOKENS, max(1, cfg.context // 4))
    new = max(1, min(RL_NEW_TOKENS, cfg.context - tp))
    T = tp + new
    per_row = 3 * model.flops_per_token() * T
    fit = max(1, int(scale * TINY_FLOP_CAP / per_row))  # rows under the cap
    prompts = max(1, min(STEP_PROMPTS, fit // STEP_GROUP))
    per_prompt = min(STEP_GROUP, fit)
    rows = prompts * per_prompt
    ids = torch.randint(0, vocab, (rows, T), generator=g)
    key_mask = torch.ones(rows, T, dtype=torch.bool)
    pad = torch.randint(0, max(1, tp // 3) + 1, (prompts,), generator=g)  # left padding of each prompt
    prompt_mask = torch.arange(tp)[None, :] >= pad[:, None]
    key_mask[:, :tp] = prompt_mask.repeat_interleave(per_prompt, 0)
    prompt_ids = torch.randint(0, vocab, (prompts, tp), generator=g)
    repeats = torch.full((prompts,), per_prompt)
    tok = torch.randint(0, vocab, (rows,), generator=g)
    minibatches = [slice(i * rows // MINIBATCHES, (i + 1) * rows // MINIBATCHES) for i in range(MINIBATCHES)
                   if (i + 1) * rows // MINIBATCHES > i * rows // MINIBATCHES]

    def run(bf16: bool) -> tuple[float, float]:
        model.set_dtype("bfloat16" if bf16 else "float32")
        t0 = time.perf_counter()
        with torch.no_grad():
            cache, _ = model.prefill_shared(prompt_ids, prompt_mask, repeats, new)
            for _ in range(new):
                model.decode_shared(tok, cache)
        t1 = time.perf_counter()
        for rows_slice in minibatches:
            opt.zero_grad(set_to_none=True)
            model(ids[rows_slice], key_mask[rows_slice]).float().log_softmax(-1).mean().backward()
            opt.step()
        return time.perf_counter() - t1, t1 - t0

    return run, {"train_tokens": int(key_mask.sum()), "decode_rows": rows, "decode_steps": new,
                 "prompts": prompts, "group": per_prompt}


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

    fp32 = [t[0] + t[1] for t in times[False]]
    return {"ratio": ratio(None), "train_ratio": ratio(0), "decode_ratio": ratio(1), **sizes,
            "repeats": len(times[False]), "fp32_s": med(False, None), "bf16_s": med(True, None),
            "spread": (max(fp32) - min(fp32)) / max(statistics.median(fp32), 1e-9)}


def measured(spec: dict) -> tuple[dict | None, str, str]:
    """(measurement, cache file name, why not measured) of the workload ``spec`` on this CPU: from
    the cache, else measured (:func:`measure`) and written there. On a busy machine
    (:func:`rlvr.model.precision_cache.busy_reason` before measuring, or float32 repeats spreading
    more than :data:`SPREAD_MAX` while measuring) nothing is cached: (None, name, why)."""
    key = cache_key(spec)
    path = cache_path(key)
    data = read_cached(path, key)
    if data is not None:
        return data, path.name, ""
    busy = busy_reason(torch.get_num_threads())
    if busy:
        return None, path.name, busy
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None  # before this process measures
    data = {**measure(spec), "measured": now(), "key": key, "load": load, "cores": os.cpu_count()}
    if data.get("spread", 0.0) > SPREAD_MAX:
        return None, path.name, f"its float32 repeats spread {data['spread']:.0%} while measuring"
    write(path, data)
    return data, path.name, ""
