"""Where the time goes: the phases of one RL step and of one large-n evaluation, each as a share of
the time and as a fraction of this machine's measured peak, in one run (docs/performance.md,
"Profile").

RL step: the embedded default (``rlvr run``'s config: tiny model, its cached pretrained base, the
arithmetic testbed, 8 prompts x 8 samples), ``--steps`` steps of ``rlvr.train.loop.train`` with the
step's own functions timed in place: sampling (``sample``), reward (``score_rollouts``), policy
forward + backward (``micro_step``), optimiser (``clip_and_step``); the rest of the step is "other"
(advantages, metrics, logging). Medians over the steps after the first.

Large-n evaluation: the same base sampled n = ``--n`` times on each of ``--problems`` held-out
problems in one batch (prefix sharing on), under ``torch.profiler``; each op's self time goes to a
phase: weight matmuls (``mm``/``addmm``), attention (``bmm``/``baddbmm``, softmax over keys, cache
writes), sampling (log-softmax, CDF, draws), compaction (``index``), the rest (norms, activations,
residuals, rotary). Then the verifier over all samples.

Peaks, measured here in the same run: float32 matmul FLOP/s (``_timing.matmul_peak``) and memory
read bandwidth (sum over a 400 MB tensor). Matmul phases report FLOP/s against the former, the
attention phase its bytes read (keys and values) against the latter.

    python benchmarks/speed/profile_phases.py [--steps 6] [--n 1024] [--problems 4] [--threads N]
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared _timing.py
from _timing import adding_time, matmul_peak  # noqa: E402


def read_bandwidth() -> float:
    """Bytes/s of a streaming read (best of 5 sums over 400 MB)."""
    x = torch.ones(100_000_000)
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        x.sum()
        best = min(best, time.perf_counter() - t)
    return x.numel() * 4 / best


def rl_step_phases(steps: int, out: Path) -> dict:
    import rlvr.train.loop as loop
    import rlvr.train.step as step
    from rlvr.config import load_config
    from rlvr.log import read_metrics
    from rlvr.train.loop import train

    clock: dict[str, list[float]] = collections.defaultdict(list)
    current: dict[str, float] = collections.defaultdict(float)

    def timed(fn, name):
        return adding_time(fn, name, current)

    real_step = loop.rl_step

    def whole(*a, **kw):
        current.clear()
        t = time.perf_counter()
        m = real_step(*a, **kw)
        clock["step"].append(time.perf_counter() - t)
        for k in ("sampling", "reward", "forward+backward", "optimiser"):
            clock[k].append(current[k])
        clock["gen_tokens"].append(m.get("response_len", 0) * 64)
        return m

    loop.rl_step = whole
    step.sample = timed(step.sample, "sampling")
    step.score_rollouts = timed(step.score_rollouts, "reward")
    step.micro_step = timed(step.micro_step, "forward+backward")
    step.clip_and_step = timed(step.clip_and_step, "optimiser")
    cfg = load_config(None, [f"train.out_dir={out}", f"train.steps={steps}", "train.eval_every=0",
                             "train.eval_problems=1", f"train.checkpoint_every={steps + 1}", "log.progress=none",
                             "task.retention_tasks=[]"])
    run = train(cfg)
    lines = read_metrics(run)
    return {"clock": {k: v[1:] for k, v in clock.items()}, "metrics": lines[1:], "cfg": cfg}


PHASE_OF = {"aten::mm": "weight matmuls", "aten::addmm": "weight matmuls", "aten::bmm": "attention",
            "aten::baddbmm": "attention", "aten::_softmax": "attention", "aten::copy_": "attention",
            "aten::_log_softmax": "sampling", "aten::cumsum": "sampling", "aten::uniform_": "sampling",
            "aten::exp": "sampling", "aten::gather": "sampling", "aten::le": "sampling",
            "aten::index": "compaction", "aten::index_select": "compaction", "aten::nonzero": "compaction"}


def eval_phases(n: int, problems: int) -> dict:
    from torch.profiler import ProfilerActivity, profile

    from rlvr.config import load_config
    from rlvr.model.io import load_policy
    from rlvr.rewards.verify import verify_all
    from rlvr.rollout.engine import sample, sample_params
    from rlvr.tasks.registry import get_task
    from rlvr.train.pretrain import base_model

    cfg = load_config(None, [])
    model, tok = load_policy(base_model(cfg.model, cfg.pretrain), device="cpu")
    model.eval()
    task = get_task(cfg.task.name, **cfg.task.knobs)
    probs = task.problems("heldout", problems)
    prompts = [p.prompt for p in probs for _ in range(n)]
    params = sample_params(cfg.sampling, tok)
    sample(model, tok, prompts[: n], params, generator=torch.Generator().manual_seed(1), batch_size=len(prompts))
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        t = time.perf_counter()
        rb = sample(model, tok, prompts, params, generator=torch.Generator().manual_seed(0), batch_size=len(prompts))
        t_sample = time.perf_counter() - t
    phases: dict[str, float] = collections.defaultdict(float)
    for ev in prof.key_averages():
        phases[PHASE_OF.get(ev.key, "other ops")] += ev.self_cpu_time_total / 1e6
    ops = sum(phases.values())
    phases["python and dispatch"] = max(0.0, t_sample - ops)
    t = time.perf_counter()
    verdicts = verify_all(task, rb.texts, [p for p in probs for _ in range(n)])
    t_verify = time.perf_counter() - t
    lengths = rb.lengths.float()
    c = model.cfg
    att_bytes = float(((lengths + rb.prompt_mask.sum(-1)) * lengths).sum()) * 2 * c.n_layer * c.d_model * 4 / 2
    return {"sample_s": t_sample, "verify_s": t_verify, "phases": dict(phases), "tokens": int(lengths.sum()),
            "rows": len(prompts), "fwd_flops_per_token": model.flops_per_token(), "att_bytes": att_bytes,
            "correct": sum(v.correct for v in verdicts) / len(verdicts)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--problems", type=int, default=4)
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    from rlvr.machine import machine_info, machine_line

    peak, bw = matmul_peak(torch.float32), read_bandwidth()
    print("machine: " + machine_line(machine_info("float32", torch.device("cpu"))))
    print(f"peaks measured now: float32 matmul {peak / 1e9:.1f} GFLOP/s, memory read {bw / 1e9:.1f} GB/s")
    out: dict = {"benchmark": "profile_phases", "peak_gflops": round(peak / 1e9, 1), "read_gb_s": round(bw / 1e9, 1)}

    with tempfile.TemporaryDirectory() as tmp:
        r = rl_step_phases(a.steps, Path(tmp) / "run")
    ck, med = r["clock"], {k: statistics.median(v) for k, v in r["clock"].items()}
    step_s = med["step"]
    print(f"\nRL step (embedded default, median of {len(ck['step'])} steps): {step_s:.3f} s")
    rows = []
    gen_tok = statistics.median(ck["gen_tokens"])
    for k in ("sampling", "reward", "forward+backward", "optimiser"):
        rows.append((k, med[k]))
    rows.append(("other", step_s - sum(v for _, v in rows)))
    out["rl_step"] = {"step_s": round(step_s, 4)}
    for k, v in rows:
        print(f"  {k:18s} {v:7.3f} s {v / step_s:6.1%}")
        out["rl_step"][k] = round(v / step_s, 4)
    print(f"  sampling: {gen_tok / med['sampling']:.0f} new tokens/s")

    e = eval_phases(a.n, a.problems)
    total = e["sample_s"] + e["verify_s"]
    print(f"\nlarge-n evaluation: {a.problems} problems x n={a.n} = {e['rows']} samples, {e['tokens']} tokens: "
          f"sampling {e['sample_s']:.2f} s ({e['tokens'] / e['sample_s']:.0f} tokens/s), "
          f"verifier {e['verify_s']:.2f} s")
    out["eval"] = {"tok_s": round(e["tokens"] / e["sample_s"]), "verify_share": round(e["verify_s"] / total, 4)}
    for k, v in sorted(e["phases"].items(), key=lambda kv: -kv[1]):
        extra = ""
        if k == "weight matmuls":
            extra = f"  {e['fwd_flops_per_token'] * e['tokens'] / v / peak:.0%} of the matmul peak"
        elif k == "attention":
            extra = f"  {e['att_bytes'] / v / bw:.0%} of the read bandwidth (keys and values)"
        print(f"  {k:20s} {v:7.3f} s {v / total:6.1%}{extra}")
        out["eval"][k] = round(v / total, 4)
    print(f"  {'verifier':20s} {e['verify_s']:7.3f} s {e['verify_s'] / total:6.1%}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
