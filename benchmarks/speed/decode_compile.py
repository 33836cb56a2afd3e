"""Does `torch.compile` speed up the tiny model's decode step on this CPU? Eager vs Inductor, same run.

The step is written in its most compile-friendly form: static shapes (attention over the whole
preallocated cache with an additive mask, the cache slot written by `index_copy_`), plain tensors
for the weights, no Python branches. 64 rows, 32 cached prompt positions, 64 decode steps, the
issue's sampler setting. Each variant's first call (compilation) is timed apart from the steady
state, which is the best of ``--repeats`` full generations.

    python benchmarks/speed/decode_compile.py [--threads N] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import time

import torch
import torch.nn.functional as F


def make_step(model, batch: int):
    """A pure decode step of ``model`` (TinyGPT): (tok (B,), pos (B,), slot (1,), k/v cache
    (L, B, H, Tmax, Dh), bias (B, 1, 1, Tmax)) -> logits (B, V). Writes the new key/value at slot."""
    c = model.cfg
    D, H = c.d_model, c.n_head
    Dh = D // H
    blocks = [tuple(t.detach() for t in (b.norm1.weight, b.attn.qkv.weight, b.attn.proj.weight,
                                         b.norm2.weight, b.mlp.up.weight, b.mlp.down.weight))
              for b in model.blocks]
    emb, w_out, w_norm = model.embed.weight.detach(), model.lm_head.weight.detach(), model.norm.weight.detach()
    cos_t, sin_t = model.rope_cos, model.rope_sin

    def rope(t, cos, sin):
        t1, t2 = t.chunk(2, -1)
        return torch.cat((t1 * cos - t2 * sin, t2 * cos + t1 * sin), -1)

    def step(tok, pos, slot, kc, vc, bias):
        x = emb[tok]
        cos, sin = cos_t[pos][:, None], sin_t[pos][:, None]
        for i, (n1, w_qkv, w_o, n2, w_up, w_down) in enumerate(blocks):
            qkv = (F.rms_norm(x, (D,), n1, 1e-6) @ w_qkv.t()).view(batch, 3, H, Dh)
            q, k = rope(qkv[:, 0], cos, sin), rope(qkv[:, 1], cos, sin)
            kc[i].index_copy_(2, slot, k[:, :, None])
            vc[i].index_copy_(2, slot, qkv[:, 2, :, None])
            att = (q[:, :, None] @ kc[i].transpose(-1, -2)) * Dh**-0.5 + bias  # (B, H, 1, Tmax)
            x = x + (att.softmax(-1) @ vc[i]).reshape(batch, D) @ w_o.t()
            a, b = (F.rms_norm(x, (D,), n2, 1e-6) @ w_up.t()).chunk(2, -1)
            x = x + (F.silu(a) * b) @ w_down.t()
        return F.rms_norm(x, (D,), w_norm, 1e-6) @ w_out.t()

    return step


def generation_s(step, model, batch: int, prompt_len: int, new_tokens: int) -> float:
    """Wall seconds of ``new_tokens`` decode steps plus sampling, from a cache holding prompt_len."""
    c = model.cfg
    t_max = prompt_len + new_tokens
    kc = torch.zeros(c.n_layer, batch, c.n_head, t_max, c.d_model // c.n_head)
    vc = torch.zeros_like(kc)
    bias = torch.full((batch, 1, 1, t_max), float("-inf"))
    bias[..., :prompt_len] = 0
    tok = torch.randint(0, model.vocab_size, (batch,))
    gen = torch.Generator().manual_seed(0)
    t = time.perf_counter()
    with torch.inference_mode():
        for s in range(new_tokens):
            bias[..., prompt_len + s] = 0
            logits = step(tok, torch.full((batch,), prompt_len + s), torch.tensor([prompt_len + s]), kc, vc, bias)
            tok = torch.multinomial(logits.softmax(-1), 1, generator=gen)[:, 0]
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch default)")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    import torch._inductor.config as inductor

    from rlvr.config import ModelConfig
    from rlvr.model.tiny import TinyGPT

    torch.manual_seed(0)
    model = TinyGPT(ModelConfig(), 100).eval()
    batch, prompt_len, new_tokens = 64, 32, 64
    step = make_step(model, batch)
    res = {"eager": min(generation_s(step, model, batch, prompt_len, new_tokens) for _ in range(args.repeats))}
    print(f"eager                 {res['eager']:.3f} s per generation (threads {torch.get_num_threads()})")
    for name, options in (("inductor", {}), ("inductor_freezing", {"freezing": True}),
                          ("inductor_cpp_wrapper", {"cpp_wrapper": True})):
        torch._dynamo.reset()
        with inductor.patch(options):
            compiled = torch.compile(step, dynamic=False)
            try:
                first = generation_s(compiled, model, batch, prompt_len, new_tokens)
            except Exception as e:  # no compiler, unsupported option: say so and go on
                print(f"{name:21s} failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
                continue
            res[name] = min(generation_s(compiled, model, batch, prompt_len, new_tokens) for _ in range(args.repeats))
        print(f"{name:21s} {res[name]:.3f} s per generation ({res['eager'] / res[name]:.2f}x eager; "
              f"first call with compilation {first:.1f} s)")
    print(json.dumps({"benchmark": "decode_compile", "threads": torch.get_num_threads(),
                      **{k: round(v, 3) for k, v in res.items()},
                      "best_speedup_vs_eager": round(res["eager"] / min(res.values()), 2)}))


if __name__ == "__main__":
    main()
