"""The GPU path in one run: a pass/fail table with numbers, at most ~8 minutes on one GPU.

Rows (each check is isolated: an exception is a FAIL row with its first line, later rows still run):

  step/<schedule>/<dtype>   one CUDA RL step with backward (sync, async, DAPO shaping x fp32, bf16)
                            on the tiny HF llama: finite loss and gradient norm, weights changed
  logp/native/<dtype>       behaviour log-probs of the native sampler vs the trainer's teacher-forced
                            recomputation (mean / max |diff|)
  logp/vllm                 the same for vLLM's processed log-probs
  sync/vllm                 weight sync: perturbed weights change vLLM's greedy generations, and after
                            load_weights vLLM's log-probs match the trainer's recomputation
  train/vllm                ``rlvr train gsm8k_tiny_hf sampling.engine=vllm train.steps=3`` (subprocess)
  speed/<engine>            tokens/s of vLLM, the native sampler and HF generate on the same prompts

Installs nothing; vLLM rows are SKIP when vLLM is not importable. Without CUDA it prints one
``cuda SKIP no CUDA`` row and exits 0. Exit status: 1 if any row FAILed, else 0. The last line is
JSON (all rows). The checks that need no vLLM, the runner and the table are
:mod:`rlvr.train.device_checks` (unit-tested on the CPU); ``benchmarks/checks/gpu_vllm_check.py``
remains the longer vLLM-only speed run, and its timing helpers are reused here.

    python benchmarks/checks/gpu_check.py [--model DIR] [--budget-s 480] [--no-vllm] [--only step,logp]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from gpu_vllm_check import _timed, _to, run_hf_generate, run_native  # this directory: the vLLM-only run's helpers

from rlvr.model.logprobs import score
from rlvr.rollout.sample import SampleParams
from rlvr.rollout.vllm import VLLMEngine, sample
from rlvr.train.device_checks import (
    FAIL,
    PASS,
    SKIP,
    STEP_SCHEDULES,
    Row,
    Runner,
    check_native_logp,
    check_step,
    diff_stats,
    format_table,
    heldout_prompts,
    hf_policy_on,
    verdict,
)
from rlvr.train.tiny_hf import build_tiny_hf

GROUPS = ("step", "logp", "sync", "train", "speed")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="gpu_check.py", description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="", help="HF model directory for the logp/sync/speed rows "
                    "(default: a random Llama of width 512, 8 layers, built locally)")
    ap.add_argument("--budget-s", type=float, default=480.0, help="wall-clock budget; later rows SKIP past it")
    ap.add_argument("--prompts", type=int, default=64, help="prompts of the logp and speed rows")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--gpu-memory-utilization", type=float, default=0.3)
    ap.add_argument("--no-vllm", action="store_true", help="skip every vLLM row")
    ap.add_argument("--only", default="", help=f"comma-separated row groups to run: {','.join(GROUPS)}")
    ap.add_argument("--logp-mean-tol", type=float, default=0.02, help="PASS bound on mean |diff| of log-probs")
    ap.add_argument("--logp-max-tol", type=float, default=1.0, help="PASS bound on max |diff| of log-probs")
    a = ap.parse_args(argv)
    only = [g for g in a.only.split(",") if g]
    bad = [g for g in only if g not in GROUPS]
    if bad:
        ap.error(f"--only: unknown group(s) {', '.join(bad)}; choose from {', '.join(GROUPS)}")
    if a.budget_s <= 0 or a.prompts < 1 or a.max_new_tokens < 1:
        ap.error("--budget-s, --prompts and --max-new-tokens must be positive")
    a.only = tuple(only) or GROUPS
    return a


# ----------------------------------------------------------------------------- vLLM checks (CUDA only)
class VLLMState:
    """One engine shared by the vLLM rows (building it costs most of a minute)."""

    engine = None
    policy = None
    tok = None


def _engine(path: str, a):
    if VLLMState.engine is None:
        VLLMState.policy, VLLMState.tok = hf_policy_on(path, "bfloat16")
        VLLMState.engine = VLLMEngine(path, gpu_memory_utilization=a.gpu_memory_utilization, max_model_len=1024)
    return VLLMState.engine, VLLMState.policy, VLLMState.tok


def check_vllm_logp(path: str, a) -> tuple[str, str]:
    engine, policy, tok = _engine(path, a)
    rb = sample(engine, tok, heldout_prompts(a.prompts), SampleParams(max_new_tokens=a.max_new_tokens),
                generator=torch.Generator().manual_seed(0))
    rb = _to(rb, "cuda")
    mean, mx = diff_stats(rb.behaviour_logp, score(policy, rb), rb.completion_mask)
    ok = mean < a.logp_mean_tol and mx < a.logp_max_tol
    return verdict(ok), f"mean|diff| {mean:.2e} max|diff| {mx:.2e} over {int(rb.completion_mask.sum())} tokens"


def check_vllm_sync(path: str, a) -> tuple[str, str]:
    engine, policy, tok = _engine(path, a)
    prompts, p = heldout_prompts(16), SampleParams(max_new_tokens=32, temperature=0.0)
    before = sample(engine, tok, prompts, p, generator=torch.Generator().manual_seed(0))
    g = torch.Generator("cuda").manual_seed(0)
    with torch.no_grad():
        for w in policy.parameters():
            w.add_(torch.randn(w.shape, generator=g, device=w.device, dtype=w.dtype) * 0.05 * w.abs().mean())
    v = engine.load_weights(policy)
    after = sample(engine, tok, prompts, p, generator=torch.Generator().manual_seed(0))
    changed = sum(x != y for x, y in zip(before.texts, after.texts))
    rb = _to(after, "cuda")
    mean, mx = diff_stats(rb.behaviour_logp, score(policy, rb), rb.completion_mask)
    ok = changed > 0 and mean < a.logp_mean_tol and mx < a.logp_max_tol
    return verdict(ok), (f"{changed}/{len(prompts)} greedy completions changed; after load_weights (v{v}) "
                         f"mean|diff| {mean:.2e} max|diff| {mx:.2e}")


def check_train_vllm(out_dir: str) -> tuple[str, str]:
    cmd = [sys.executable, "-m", "rlvr.cli", "train", "gsm8k_tiny_hf", "sampling.engine=vllm",
           "train.steps=3", "train.device=cuda", "train.eval_every=0", "train.eval_problems=4",
           "train.final_eval_samples=1", f"train.out_dir={out_dir}", "log.progress=plain"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    tail = (r.stderr.strip() or r.stdout.strip()).splitlines()[-1:] or [""]
    return verdict(r.returncode == 0), f"rc {r.returncode}: {tail[0][:140]}"


def check_speed(path: str, engine_name: str, a) -> tuple[str, str]:
    prompts, p = heldout_prompts(a.prompts), SampleParams(max_new_tokens=a.max_new_tokens)
    if engine_name == "vllm":
        engine, _, tok = _engine(path, a)
        rb, s = _timed(lambda: sample(engine, tok, prompts, p, generator=torch.Generator().manual_seed(0)))
        tps = int(rb.completion_mask.sum()) / s
    else:
        policy, tok = hf_policy_on(path, "bfloat16")
        if engine_name == "native":
            tps, note = run_native(policy, tok, prompts, p)
            if tps is None:
                return FAIL, note
        else:
            tps = run_hf_generate(policy, tok, prompts, a.max_new_tokens)
    return PASS, f"{tps:,.0f} tok/s ({a.prompts} prompts x {a.max_new_tokens} new)"


def _has_vllm() -> bool:
    try:
        import vllm  # noqa: F401
    except ImportError:
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    if not torch.cuda.is_available():
        rows = [Row("cuda", SKIP, f"no CUDA (torch {torch.__version__}); nothing checked")]
        print(format_table(rows))
        print(json.dumps([dataclasses.asdict(r) for r in rows]))
        return 0
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    tmp = tempfile.mkdtemp(prefix="gpu_check_")
    os.environ.setdefault("RLVR_CACHE", str(Path(tmp) / "cache"))
    run = Runner(a.budget_s)
    if "step" in a.only:
        for schedule in STEP_SCHEDULES:
            for dtype in ("float32", "bfloat16"):
                run.run(f"step/{schedule}/{dtype}", lambda s=schedule, d=dtype: check_step(s, d, tmp))
    path = a.model
    if not path and set(a.only) & {"logp", "sync", "speed"}:
        path = str(build_tiny_hf(Path(tmp) / "llama", hidden=512, layers=8, heads=8, context=1024))
    vllm_ok = not a.no_vllm and _has_vllm()
    why = "--no-vllm" if a.no_vllm else "vllm not importable (pip install 'rlvr[vllm]')"

    def vllm_row(name, fn):
        run.run(name, fn) if vllm_ok else run.rows.append(Row(name, SKIP, why))

    if "logp" in a.only:
        for dtype in ("float32", "bfloat16"):
            run.run(f"logp/native/{dtype}", lambda d=dtype: check_native_logp(
                path, d, prompts=a.prompts, max_new_tokens=a.max_new_tokens, mean_tol=a.logp_mean_tol,
                max_tol=a.logp_max_tol))
        vllm_row("logp/vllm", lambda: check_vllm_logp(path, a))
    if "speed" in a.only:  # before the sync row, which perturbs the engine's weights
        vllm_row("speed/vllm", lambda: check_speed(path, "vllm", a))
        run.run("speed/native", lambda: check_speed(path, "native", a))
        run.run("speed/hf_generate", lambda: check_speed(path, "hf", a))
    if "sync" in a.only:
        vllm_row("sync/vllm", lambda: check_vllm_sync(path, a))
    if "train" in a.only:
        VLLMState.engine = None  # free the shared engine's memory before the subprocess builds its own
        torch.cuda.empty_cache()
        vllm_row("train/vllm", lambda: check_train_vllm(str(Path(tmp) / "runs")))
    print(format_table(run.rows))
    print(json.dumps([dataclasses.asdict(r) for r in run.rows]))
    return 1 if any(r.status == FAIL for r in run.rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
