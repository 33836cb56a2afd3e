"""Sampling for large-n evaluation: n = 1024 samples of each problem, against the weight-matmul
floor and Hugging Face `generate`, same batch, same machine, same run.

Setting (sampler_vs_hf.py's, at large n): prompts of 32 tokens, 64 new tokens per sample,
temperature 1, EOS disabled on every side so that each row makes exactly 64 tokens; ``--problems``
prompts x ``--n`` samples, sampled in one batch of problems x n rows (the batch rlvr's evaluation
takes when memory allows, :func:`rlvr.rollout.budget.rows_for`; printed). Timed, each the median
of ``--repeats``:

- rlvr with prefix sharing (each prompt prefilled once; the tiny model's shared-prefix attention),
- rlvr without it (the prompt repeated row by row: the sampler before prefix sharing),
- HF ``generate`` on a LlamaForCausalLM of the same size (the prompt repeated row by row),
- the weight-matmul floor at the same batch (``sampler_vs_hf.matmul_floor_s``: prefill of batch x
  32 rows, then 64 steps of batch rows through every Linear weight) and the decode attention floor.

Targets (issue "Speed where the lab spends its time"): rlvr >= 70% of the floor's tokens/s and
>= 3x HF generate. The last line is machine-readable.

    python benchmarks/speed/large_n_eval.py [--n 1024] [--problems 1] [--repeats 2] [--threads N]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared _timing.py
from _timing import median_time  # noqa: E402
from sampler_vs_hf import attention_floor_s, matmul_floor_s, tiny_and_llama  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1024, help="samples per problem (default 1024)")
    ap.add_argument("--problems", type=int, default=1, help="problems sampled in one batch (default 1)")
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch default)")
    ap.add_argument("--no-hf", action="store_true", help="skip HF generate (the slowest part)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    from rlvr.machine import machine_info, machine_line
    from rlvr.rollout.budget import rows_for
    from rlvr.rollout.sample import SampleParams, generate

    torch.manual_seed(0)
    vocab, tp, new = 100, 32, args.new_tokens
    tiny, llama = tiny_and_llama(vocab)
    batch = args.problems * args.n
    fits = rows_for(tiny, tp + new)
    prompts = torch.randint(4, vocab, (args.problems, tp))
    mask = torch.ones_like(prompts, dtype=torch.bool)
    rows, rows_mask = prompts.repeat_interleave(args.n, 0), mask.repeat_interleave(args.n, 0)
    repeats = torch.full((args.problems,), args.n)
    p = SampleParams(max_new_tokens=new, temperature=1.0)
    n_tok = batch * new

    def shared():
        rb = generate(tiny, prompts, mask, p, eos_id=-1, pad_id=0, generator=torch.Generator().manual_seed(0),
                      repeats=repeats)
        assert int(rb.lengths.sum()) == n_tok

    def repeated():
        rb = generate(tiny, rows, rows_mask, p, eos_id=-1, pad_id=0, generator=torch.Generator().manual_seed(0))
        assert int(rb.lengths.sum()) == n_tok

    @torch.no_grad()
    def hf():
        out = llama.generate(rows, attention_mask=rows_mask.long(), do_sample=True, temperature=1.0, top_k=0,
                             top_p=1.0, max_new_tokens=new, min_new_tokens=new, eos_token_id=None, pad_token_id=0)
        assert out.shape[1] == tp + new

    info = machine_info("float32", torch.device("cpu"))
    print("machine: " + machine_line(info))
    print(f"setting: {args.problems} problem(s) x n={args.n} = batch {batch} rows (memory allows {fits}), "
          f"prompt {tp} tokens, {new} new tokens, temperature 1, EOS off")
    res = {}
    for name, fn in (("rlvr_shared", shared), ("rlvr_repeated", repeated), ("hf_generate", hf)):
        if name == "hf_generate" and args.no_hf:
            continue
        res[name] = n_tok / median_time(fn, args.repeats)
        print(f"{name:14s} {res[name]:9.0f} tokens/s (median of {args.repeats})")
    floor = matmul_floor_s(tiny, batch, tp, new)
    with torch.inference_mode():
        att = attention_floor_s(tiny, batch, tp, new)
    floor_tok_s = n_tok / floor
    frac = res["rlvr_shared"] / floor_tok_s
    print(f"weight-matmul floor at batch {batch}: {floor:.3f} s = {floor_tok_s:.0f} tokens/s; rlvr reaches "
          f"{frac:.0%} of it (target 70%: {'met' if frac >= 0.7 else 'not met'})")
    print(f"decode attention floor (full cache per row, as without sharing): {att:.3f} s; matmul + attention "
          f"{floor + att:.3f} s = {n_tok / (floor + att):.0f} tokens/s")
    print(f"prefix sharing: {res['rlvr_shared'] / res['rlvr_repeated']:.2f}x the repeated prompts")
    out = {"benchmark": "large_n_eval", "n": args.n, "problems": args.problems, "batch": batch,
           "rlvr_shared_tok_s": round(res["rlvr_shared"]), "rlvr_repeated_tok_s": round(res["rlvr_repeated"]),
           "floor_tok_s": round(floor_tok_s), "of_floor": round(frac, 3), "attention_floor_s": round(att, 3),
           "sharing_speedup": round(res["rlvr_shared"] / res["rlvr_repeated"], 2),
           "machine": machine_line(info)}
    if "hf_generate" in res:
        vs = res["rlvr_shared"] / res["hf_generate"]
        print(f"rlvr / hf_generate: {vs:.2f}x (target 3x: {'met' if vs >= 3 else 'not met'})")
        out.update(hf_tok_s=round(res["hf_generate"]), vs_hf=round(vs, 2))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
