"""Sampler speed: rlvr's KV-cache sampler on the tiny model vs Hugging Face `generate` on a
LlamaForCausalLM of the same size (random weights), same batch, same machine, same run.

Setting (issue "Foundation"): 64 prompts of ~32 tokens, 64 new tokens, temperature 1, no early
stop (EOS disabled on both sides so both generate exactly 64 tokens per row).
Prints tokens/s of each and the ratio; last line machine-readable.

    python benchmarks/speed/sampler_vs_hf.py [--threads N] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared _timing.py
from _timing import median_time  # noqa: E402


def tiny_and_llama(vocab: int):
    from transformers import LlamaConfig, LlamaForCausalLM

    from rlvr.config import ModelConfig
    from rlvr.model.tiny import TinyGPT

    cfg = ModelConfig()
    tiny = TinyGPT(cfg, vocab).eval()
    hidden = int(8 * cfg.d_model / 3 + 63) // 64 * 64
    llama = LlamaForCausalLM(LlamaConfig(
        vocab_size=vocab, hidden_size=cfg.d_model, intermediate_size=hidden, num_hidden_layers=cfg.n_layer,
        num_attention_heads=cfg.n_head, num_key_value_heads=cfg.n_head, max_position_embeddings=256,
        tie_word_embeddings=True, pad_token_id=0, bos_token_id=1, eos_token_id=2)).eval()
    return tiny, llama


def matmul_floor_s(model, batch: int, prompt_len: int, new_tokens: int, repeats: int = 3) -> float:
    """Seconds that the weight matmuls alone of this generation take here (prefill of batch x
    prompt_len rows, then new_tokens steps of batch rows through every Linear weight): a floor for
    any sampler of this model in float32 on this machine, whatever its overheads."""
    weights = [m.weight for m in model.modules() if isinstance(m, torch.nn.Linear)]
    xs = {rows: {w.shape[1]: torch.randn(rows, w.shape[1]) for w in weights} for rows in (batch * prompt_len, batch)}
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        for w in weights:
            xs[batch * prompt_len][w.shape[1]] @ w.t()
        for _ in range(new_tokens):
            for w in weights:
                xs[batch][w.shape[1]] @ w.t()
        best = min(best, time.perf_counter() - t)
    return best


def attention_floor_s(model, batch: int, prompt_len: int, new_tokens: int, repeats: int = 3) -> float:
    """Seconds that the decode-step attention alone takes here (per step and layer: scores against
    the cached keys, softmax, weighted sum of the cached values, over a cache that grows from
    prompt_len + 1 to prompt_len + new_tokens): the KV-cache reads every sampler has to make."""
    c = model.cfg
    nh, dh, t_max = batch * c.n_head, c.d_model // c.n_head, prompt_len + new_tokens
    k, v, q = torch.randn(nh, t_max, dh), torch.randn(nh, t_max, dh), torch.randn(nh, 1, dh)
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        for step in range(new_tokens):
            s = prompt_len + step + 1
            for _ in range(c.n_layer):
                torch.bmm((q @ k[:, :s].transpose(1, 2)).softmax(-1), v[:, :s])
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch default)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--new-tokens", type=int, default=64)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    from rlvr.rollout.sample import SampleParams, generate

    torch.manual_seed(0)
    vocab = 100
    tiny, llama = tiny_and_llama(vocab)
    prompt = torch.randint(4, vocab, (args.batch, 32))
    mask = torch.ones_like(prompt, dtype=torch.bool)
    p = SampleParams(max_new_tokens=args.new_tokens, temperature=1.0)
    n_tok = args.batch * args.new_tokens

    def run_rlvr():
        rb = generate(tiny, prompt, mask, p, eos_id=-1, pad_id=0, generator=torch.Generator().manual_seed(0))
        assert int(rb.lengths.sum()) == n_tok

    @torch.no_grad()
    def run_hf():
        out = llama.generate(prompt, attention_mask=mask.long(), do_sample=True, temperature=1.0, top_k=0,
                             top_p=1.0, max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens,
                             eos_token_id=None, pad_token_id=0)
        assert out.shape[1] == 32 + args.new_tokens

    res = {}
    for name, fn in (("rlvr", run_rlvr), ("hf_generate", run_hf)):
        res[name] = n_tok / median_time(fn, args.repeats)
        print(f"{name:12s} {res[name]:10.0f} tokens/s (median of {args.repeats})")
    ratio = res["rlvr"] / res["hf_generate"]
    floor = matmul_floor_s(tiny, args.batch, 32, args.new_tokens)
    ceiling = n_tok / floor / res["hf_generate"]
    print(f"ratio rlvr / hf_generate: {ratio:.2f}x  (params: tiny {tiny.num_params()}, "
          f"llama {sum(q.numel() for q in llama.parameters())}, threads {torch.get_num_threads()})")
    print(f"weight matmuls alone: {floor:.3f} s = {n_tok / floor:.0f} tokens/s, i.e. at most {ceiling:.2f}x "
          f"hf_generate for any float32 sampler here; rlvr spends {n_tok / res['rlvr'] / floor:.2f}x that time")
    with torch.inference_mode():
        floor2 = floor + attention_floor_s(tiny, args.batch, 32, args.new_tokens)
    ceiling2 = n_tok / floor2 / res["hf_generate"]
    print(f"weight matmuls + decode attention: {floor2:.3f} s, i.e. at most {ceiling2:.2f}x hf_generate; "
          f"3x would leave {n_tok / res['hf_generate'] / 3 - floor2:.3f} s for everything else")
    print(json.dumps({"benchmark": "sampler_vs_hf", "rlvr_tok_s": round(res["rlvr"]),
                      "hf_tok_s": round(res["hf_generate"]), "ratio": round(ratio, 2),
                      "matmul_floor_tok_s": round(n_tok / floor), "ratio_ceiling": round(ceiling, 2),
                      "matmul_attention_floor_s": round(floor2, 3),
                      "ratio_ceiling_with_attention": round(ceiling2, 2)}))


if __name__ == "__main__":
    main()
