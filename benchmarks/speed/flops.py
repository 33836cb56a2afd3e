"""Achieved FLOP/s of rlvr's training step (forward + backward) and of its sampler, as a fraction of
the float32 matmul peak measured by this script on this machine, in the same run; for the embedded
tiny model and for tiny Hugging Face Qwen2 models (built locally, no download). The bfloat16 matmul
peak is measured and printed too: on CPUs without AVX-512-BF16/AMX it is far below float32, so
``model.dtype=bfloat16`` autocast is slower there, not faster.

Training step: the trainer's path (``rlvr.model.logprobs``: forward over prompt + completion,
float32 LM head on the completion positions, log-softmax, backward), 64 rows of 32 prompt + 64
completion tokens. FLOPs = 3 x forward FLOPs; forward = 2 x matmul parameters per token, with the
LM head counted only where it runs (completion positions); attention scores are not counted, so
the fractions are slight underestimates. Generation: ``rlvr.rollout.sample.generate``, 64 prompts
of 32 tokens, 64 new tokens (EOS off), FLOPs = forward FLOPs per token x (prompt + new tokens).

    python benchmarks/speed/flops.py [--threads N] [--repeats 5] [--models tiny,hf-0.14M,hf-5M]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared _timing.py
from _timing import matmul_peak, median_time  # noqa: E402

HF_MODELS = {"hf-0.14M": {"arch": "qwen2", "hidden": 64, "layers": 2, "heads": 4},
             "hf-5M": {"arch": "qwen2", "hidden": 256, "layers": 5, "heads": 4}}


def load(name: str, cache: Path):
    """-> (policy, vocab size, LM-head FLOPs per token)."""
    from rlvr.config import ModelConfig

    if name == "tiny":
        from rlvr.model.tiny import TinyGPT

        torch.manual_seed(0)
        m = TinyGPT(ModelConfig(context=128), 100)
        return m, 100, 2 * m.lm_head.weight.numel()
    from rlvr.model.hf import load_hf_policy
    from rlvr.train.tiny_hf import build_tiny_hf

    d = cache / name
    if not (d / "config.json").exists():
        build_tiny_hf(d, **HF_MODELS[name])
    m, _ = load_hf_policy(str(d), ModelConfig(kind="hf", path=str(d), chat_template=False))
    return m, 259, 2 * m.lm_head.weight.numel()


def measure(model, vocab: int, head: int, batch: int, tp: int, new: int, repeats: int) -> dict:
    from rlvr.model.logprobs import completion_logits, token_logprobs
    from rlvr.rollout.sample import SampleParams, generate

    fwd = model.flops_per_token()
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, vocab, (batch, tp + new), generator=g)
    mask = torch.ones_like(ids, dtype=torch.bool)

    def train():
        model.zero_grad(set_to_none=True)
        logp, _ = token_logprobs(completion_logits(model, ids, mask, tp), ids[:, tp:])
        logp.mean().backward()

    model.train()
    t_train = median_time(train, repeats)
    train_flops = 3 * ((fwd - head) * batch * (tp + new) + head * batch * new)
    model.eval()
    p = SampleParams(max_new_tokens=new, temperature=1.0)

    def gen():
        rb = generate(model, ids[:, :tp], mask[:, :tp], p, eos_id=-1, pad_id=0,
                      generator=torch.Generator().manual_seed(0))
        assert int(rb.lengths.sum()) == batch * new

    t_gen = median_time(gen, repeats)
    return {"params": model.num_params(), "train_s": t_train, "train_tok_s": batch * (tp + new) / t_train,
            "train_flops_s": train_flops / t_train, "gen_s": t_gen, "gen_tok_s": batch * new / t_gen,
            "gen_flops_s": fwd * batch * (tp + new) / t_gen}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch default)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--models", default="tiny," + ",".join(HF_MODELS))
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--prompt-tokens", type=int, default=32)
    ap.add_argument("--new-tokens", type=int, default=64)
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    cache = Path(os.environ.get("RLVR_CACHE", Path.home() / ".cache" / "rlvr")) / "bench-flops"
    peak = matmul_peak(torch.float32)
    peak_bf16 = matmul_peak(torch.bfloat16, sizes=(256, 512), reps=3)
    print(f"threads {torch.get_num_threads()}: float32 matmul peak {peak / 1e9:.1f} GFLOP/s, bfloat16 "
          f"{peak_bf16 / 1e9:.2f} GFLOP/s ({peak / peak_bf16:.0f}x slower)")
    print(f"{'model':10s} {'params':>10s} {'train tok/s':>12s} {'GFLOP/s':>8s} {'of peak':>8s} "
          f"{'gen tok/s':>10s} {'GFLOP/s':>8s} {'of peak':>8s}")
    out = {"benchmark": "flops", "threads": torch.get_num_threads(), "peak_fp32_gflops": round(peak / 1e9, 2),
           "peak_bf16_gflops": round(peak_bf16 / 1e9, 3), "models": {}}
    for name in [m for m in a.models.split(",") if m]:
        if name != "tiny" and name not in HF_MODELS:
            raise SystemExit(f"unknown model {name!r}; use tiny, {', '.join(HF_MODELS)}")
        model, vocab, head = load(name, cache)
        r = measure(model, vocab, head, a.batch, a.prompt_tokens, a.new_tokens, a.repeats)
        print(f"{name:10s} {r['params']:10,d} {r['train_tok_s']:12.0f} {r['train_flops_s'] / 1e9:8.1f} "
              f"{r['train_flops_s'] / peak:8.1%} {r['gen_tok_s']:10.0f} {r['gen_flops_s'] / 1e9:8.1f} "
              f"{r['gen_flops_s'] / peak:8.1%}", flush=True)
        out["models"][name] = {"params": r["params"], "train_tok_s": round(r["train_tok_s"]),
                               "train_fraction_of_peak": round(r["train_flops_s"] / peak, 3),
                               "gen_tok_s": round(r["gen_tok_s"]),
                               "gen_fraction_of_peak": round(r["gen_flops_s"] / peak, 3)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
