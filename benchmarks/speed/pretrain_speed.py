"""Pretraining throughput of the tiny model: tokens/s and achieved FLOP/s as a fraction of the
float32 matmul peak measured by this script on this machine, in the same run.

FLOPs per token = 6 x matmul parameters (forward + backward); attention scores are not counted,
so the fraction is a slight underestimate. Peak = best of several square float32 matmuls.

    python benchmarks/speed/pretrain_speed.py [--steps 20] [--threads N] [--dtype float32|bfloat16]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared _timing.py
from _timing import matmul_peak  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    from rlvr.config import ModelConfig, PretrainConfig
    from rlvr.model.tiny import TinyGPT

    pre = PretrainConfig()
    cfg = ModelConfig(dtype=args.dtype)
    model = TinyGPT(cfg, 100)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randint(0, 100, (pre.batch_size, pre.seq_len + 1))
    times = []
    for i in range(args.steps + 3):
        t = time.perf_counter()
        logits = model(x[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 100), x[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if i >= 3:
            times.append(time.perf_counter() - t)
    step_s = sorted(times)[len(times) // 2]
    tokens = pre.batch_size * pre.seq_len
    flops = 3 * model.flops_per_token() * tokens / step_s
    peak = matmul_peak(torch.bfloat16 if args.dtype == "bfloat16" else torch.float32)
    budget_s = pre.tokens / (tokens / step_s)
    print(f"tiny model {model.num_params()} params, batch {pre.batch_size} x {pre.seq_len}, {args.dtype}, "
          f"threads {torch.get_num_threads()}")
    print(f"step {step_s * 1000:.1f} ms, {tokens / step_s:.0f} tokens/s, {flops / 1e9:.1f} GFLOP/s achieved")
    print(f"{args.dtype} matmul peak {peak / 1e9:.1f} GFLOP/s -> {flops / peak:.1%} of peak")
    print(f"default pretraining budget {pre.tokens} tokens -> {budget_s:.0f} s of optimiser steps")
    print(json.dumps({"benchmark": "pretrain_speed", "tokens_per_s": round(tokens / step_s),
                      "achieved_gflops": round(flops / 1e9, 1), "peak_gflops": round(peak / 1e9, 1),
                      "fraction_of_peak": round(flops / peak, 3), "default_budget_s": round(budget_s)}))


if __name__ == "__main__":
    main()
