"""Async (PipelineRL, 2 generator workers) vs sync training throughput on the quickstart recipe.

Baseline: the synchronous step (``pipeline.mode=sync``, :func:`rlvr.train.step.rl_step`) on the
same base model, recipe, seed and wall-clock budget, in the same process, with its better
intra-op thread count (1 or all cores, probed with one step each: on a loaded machine all
cores can be several times slower). Async runs ``pipeline.mode=async pipeline.workers=2``
(local backend: generator threads, 1 intra-op thread each on 2 cores).

Measured per mode: samples/s reaching the loss (P*G rows per trainer step / wall time), steps
done in the budget, trainer idle fraction (async; the first step, which waits for the pipeline
to fill, excluded), largest lag observed, held-out pass@1 after the budget (and the mean train
reward of the last 3 steps), and the cores the process actually got (CPU seconds per wall
second: overlap needs a second core that is free). ``--quick``: a small base model (pretrained
once, cached), one seed, 45 s per mode, under 5 minutes. Full: the quickstart base model,
seeds 0,1,2, 240 s per mode.

    python benchmarks/speed/async_vs_sync.py [--quick] [--budget S] [--seeds 0,1,2] [--max-lag K]

The last line is machine-readable:
    async_vs_sync=<float> max_lag=<int> k=<int> trainer_idle=<float>
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import warnings

import torch

QUICK_MODEL = ["model.n_layer=2", "model.d_model=64", "model.n_head=4", "pretrain.tokens=400000"]


def _config(over: list[str]):
    from rlvr.config import load_config

    return load_config("quickstart", [*over, "log.progress=none"])


def run_mode(over: list[str], budget_s: float, n_eval: int, threads: int | None = None) -> dict:
    """Train for ``budget_s`` seconds of wall clock; throughput and outcome of the run."""
    from rlvr.train.loop import build_policy, build_state, heldout_pass_rate, make_source
    from rlvr.train.step import rl_step

    cfg = _config(over)
    if threads:
        torch.set_num_threads(threads)
    st = build_state(cfg, *build_policy(cfg, "none"))
    B = cfg.algo.prompts_per_step * cfg.algo.group_size
    source, sharding = make_source(st)
    rows, t0, cpu0 = [], time.monotonic(), time.process_time()
    try:
        while time.monotonic() - t0 < budget_s:
            rows.append(rl_step(st, 10**6, source, sharding))
    finally:
        source.close()
    elapsed, cpu = time.monotonic() - t0, time.process_time() - cpu0
    later = rows[1:] or rows
    idle = sum(r.get("trainer_idle_s", 0.0) for r in later)
    busy = sum(r.get("trainer_busy_s", 0.0) for r in later)
    return {
        "steps": len(rows), "elapsed_s": elapsed, "samples_per_s": len(rows) * B / elapsed,
        "trainer_idle": idle / (idle + busy) if idle + busy > 0 else None,
        "max_lag": max(int(r.get("lag_max", 0)) for r in rows),
        "discarded": {k: v for k, v in st.counters.items() if k.startswith("pipeline_discarded")},
        "train_reward_last3": statistics.fmean(r["reward"] for r in rows[-3:]),
        "heldout_pass_rate": heldout_pass_rate(st, n_eval, cfg.train.seed + 7),
        "threads": torch.get_num_threads(),
        "cores_used": cpu / elapsed,  # CPU seconds of this process per wall second (all threads)
    }


def best_sync_threads(over: list[str]) -> int:
    """The faster of 1 and all cores for one sync step (the baseline gets its better setting)."""
    from rlvr.train.loop import build_policy, build_state
    from rlvr.train.step import rl_step

    cores = os.cpu_count() or 1
    if cores == 1:
        return 1
    times = {}
    cfg = _config(over)
    for n in (1, cores):
        torch.set_num_threads(n)
        st = build_state(cfg, *build_policy(cfg, "none"))
        t = time.monotonic()
        rl_step(st, 10**6)
        times[n] = time.monotonic() - t
    return min(times, key=times.get)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small model, one seed, 45 s per mode (< 5 min)")
    ap.add_argument("--budget", type=float, help="seconds of wall clock per mode and seed")
    ap.add_argument("--seeds", help="comma-separated seeds (default 0,1,2; --quick: 0)")
    ap.add_argument("--max-lag", type=int, default=2, help="pipeline.max_lag k of the async runs")
    ap.add_argument("--backend", default="local", choices=["local", "ray"],
                    help="pipeline.backend of the async runs: local (generator threads) or ray (actor processes)")
    ap.add_argument("--json", help="also write the full results here")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    budget = args.budget or (45.0 if args.quick else 240.0)
    seeds = [int(s) for s in (args.seeds or ("0" if args.quick else "0,1,2")).split(",")]
    base = QUICK_MODEL if args.quick else []
    n_eval = 100 if args.quick else 200
    from rlvr.train.loop import build_policy

    t_pre = time.monotonic()
    build_policy(_config(base), "plain")  # pretrain (or load) the cached base model first
    print(f"base model ready in {time.monotonic() - t_pre:.0f}s")
    threads = best_sync_threads(base)
    print(f"sync baseline: {threads} intra-op thread(s) (probed)")
    results = []
    for seed in seeds:
        over = [*base, f"train.seed={seed}"]
        sync = run_mode([*over, "pipeline.mode=sync"], budget, n_eval, threads)
        pipe = ["pipeline.mode=async", "pipeline.workers=2", f"pipeline.max_lag={args.max_lag}",
                f"pipeline.backend={args.backend}"]
        asyn = run_mode([*over, *pipe], budget, n_eval)
        results.append({"seed": seed, "sync": sync, "async": asyn})
        for name, r in (("sync", sync), ("async", asyn)):
            idle = "-" if r["trainer_idle"] is None or name == "sync" else f"{r['trainer_idle']:.3f}"
            print(f"seed={seed} {name:5s} steps={r['steps']:3d} samples/s={r['samples_per_s']:7.2f} "
                  f"trainer_idle={idle} max_lag={r['max_lag']} heldout_pass@1={r['heldout_pass_rate']:.3f} "
                  f"train_reward={r['train_reward_last3']:.3f} cores_used={r['cores_used']:.2f} "
                  f"discarded={r['discarded']}")
    ratio = statistics.fmean(r["async"]["samples_per_s"] / r["sync"]["samples_per_s"] for r in results)
    idle = statistics.fmean(r["async"]["trainer_idle"] or 0.0 for r in results)
    max_lag = max(r["async"]["max_lag"] for r in results)
    held = {m: statistics.fmean(r[m]["heldout_pass_rate"] for r in results) for m in ("sync", "async")}
    print(f"mean over {len(seeds)} seed(s): async/sync throughput {ratio:.2f}x (target >= 1.3), trainer idle "
          f"{idle:.1%} (target < 15%), held-out pass@1 after {budget:.0f}s: sync {held['sync']:.3f} "
          f"async {held['async']:.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"budget_s": budget, "k": args.max_lag, "results": results}, f, indent=1)
    print(f"async_vs_sync={ratio:.3f} max_lag={max_lag} k={args.max_lag} trainer_idle={idle:.3f}")


if __name__ == "__main__":
    main()
