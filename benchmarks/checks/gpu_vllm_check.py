"""vLLM vs native generation on one GPU: tokens/s, and whether vLLM's behaviour log-probs agree
with the trainer's teacher-forced recomputation.

Run on a CUDA machine with vLLM installed (``pip install 'rlvr[vllm]'``); installs nothing. The
default model is a random Llama (width 1024, 12 layers, byte tokenizer) built locally, so no hub
is needed; ``--model DIR`` takes any HF model directory (e.g. Qwen2.5-0.5B-Instruct).

Baselines, timed on the same prompts in the same run:
  native  rlvr.rollout.sample.generate on rlvr.model.hf.HFPolicy as the trainer holds it (float32
          master weights, bf16 autocast, FP32 LM head; KV cache, batched)
  hf      transformers' model.generate (sampling, KV cache)
Check: vLLM's sampled completions are re-scored by HFPolicy (bf16, FP32 LM head); prints the mean and
max |logp_vllm - logp_trainer| and the mean ratio exp(logp_trainer - logp_vllm) - 1. Ends with one
machine-readable JSON line.

    python benchmarks/checks/gpu_vllm_check.py [--model DIR] [--prompts 256] [--max-new-tokens 256]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
import time

import torch

from rlvr.config import ModelConfig
from rlvr.model.hf import load_hf_policy
from rlvr.model.logprobs import score
from rlvr.rollout.sample import SampleParams, generate
from rlvr.rollout.vllm import VLLMEngine, sample
from rlvr.train.device_checks import heldout_prompts
from rlvr.train.tiny_hf import build_tiny_hf


def _to(rb, device):
    return dataclasses.replace(rb, **{f.name: getattr(rb, f.name).to(device) for f in dataclasses.fields(rb)
                                      if isinstance(getattr(rb, f.name), torch.Tensor)})


def _timed(fn):
    torch.cuda.synchronize()
    t = time.perf_counter()
    out = fn()
    torch.cuda.synchronize()
    return out, time.perf_counter() - t


def run_native(policy, tok, prompts, p) -> tuple[float | None, str]:
    ids, mask = tok.batch_encode_left(prompts)
    try:
        gen = torch.Generator("cuda").manual_seed(0)
        rb, s = _timed(lambda: generate(policy, ids.cuda(), mask.cuda(), p, eos_id=tok.eos_id,
                                        pad_id=tok.pad_id, generator=gen))
    except RuntimeError as e:  # the native sampler allocates its buffers on the CPU
        return None, f"native sampler failed on cuda: {str(e).splitlines()[0]}"
    return int(rb.completion_mask.sum()) / s, ""


def run_hf_generate(policy, tok, prompts, max_new: int) -> float:
    ids, mask = tok.batch_encode_left(prompts)
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        out, s = _timed(lambda: policy.lm.generate(input_ids=ids.cuda(), attention_mask=mask.cuda().long(),
                                                   do_sample=True, temperature=1.0, top_p=1.0, top_k=0,
                                                   max_new_tokens=max_new, pad_token_id=tok.pad_id,
                                                   eos_token_id=tok.eos_id))
    new = out[:, ids.shape[1]:]
    return int((new != tok.pad_id).sum()) / s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="HF model directory (default: a random Llama built locally)")
    ap.add_argument("--prompts", type=int, default=256)
    ap.add_argument("--max-new-tokens", type=int, default=256)
    ap.add_argument("--gpu-memory-utilization", type=float, default=0.4)
    a = ap.parse_args()
    path = a.model or str(build_tiny_hf(tempfile.mkdtemp() + "/llama", hidden=1024, layers=12, heads=16,
                                        context=1024))
    prompts = heldout_prompts(a.prompts)
    p = SampleParams(max_new_tokens=a.max_new_tokens, temperature=1.0)
    cfg = ModelConfig(kind="hf", path=path, dtype="bfloat16", chat_template=False)
    policy, tok = load_hf_policy(path, cfg)
    policy = policy.cuda().eval()
    engine = VLLMEngine(path, gpu_memory_utilization=a.gpu_memory_utilization, max_model_len=1024)
    sample(engine, tok, prompts[:8], p, generator=torch.Generator().manual_seed(1))  # warm-up
    rb, s = _timed(lambda: sample(engine, tok, prompts, p, generator=torch.Generator().manual_seed(0)))
    vllm_tps = int(rb.completion_mask.sum()) / s
    native_tps, native_note = run_native(policy, tok, prompts, p)
    hf_tps = run_hf_generate(policy, tok, prompts, a.max_new_tokens)
    rb = _to(rb, "cuda")
    recomputed = score(policy, rb)
    m = rb.completion_mask
    diff = (recomputed - rb.behaviour_logp)[m]
    res = {"model": path, "prompts": a.prompts, "tokens": int(m.sum()), "vllm_tok_s": vllm_tps,
           "native_tok_s": native_tps, "hf_generate_tok_s": hf_tps,
           "vllm_over_native": vllm_tps / native_tps if native_tps else None,
           "vllm_over_hf": vllm_tps / hf_tps,
           "logp_abs_diff_mean": float(diff.abs().mean()), "logp_abs_diff_max": float(diff.abs().max()),
           "ratio_minus_1_mean": float((diff.exp() - 1).mean()), "note": native_note}
    print(f"vLLM {vllm_tps:,.0f} tok/s | native {native_tps or float('nan'):,.0f} tok/s | HF generate "
          f"{hf_tps:,.0f} tok/s {native_note}")
    print(f"logp agreement over {res['tokens']} tokens: mean |diff| {res['logp_abs_diff_mean']:.4f}, "
          f"max {res['logp_abs_diff_max']:.4f}, mean ratio-1 {res['ratio_minus_1_mean']:+.4f}")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
