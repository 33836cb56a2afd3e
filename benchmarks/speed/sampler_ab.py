"""The RL step's sampling phase alone, two source trees against each other in one run (issue 53,
item 2; docs/performance.md, "RL steps per core-hour").

Each side is a fresh process (``PYTHONPATH`` at its checkout: a ref is ``git worktree add --detach``
under /tmp, removed afterwards; ``--current`` empty is this working tree) that builds the recipe of
``step_throughput.py`` (quickstart, its cached base, ``--prompts`` x ``--group``, float32, one torch
thread), runs ``--after-steps`` RL steps (``rl_step``: the sampler then runs in the memory state
the RL step leaves, which is what the step's sampling phase meets; 0: a process that only samples),
puts the starting weights back, and calls ``rlvr.rollout.engine.sample`` on the first step's
problems as the step does (``--calls`` times, the generator of step i for call i). The sides
alternate for ``--rounds`` rounds, so that the machine's load weighs on both. Printed: the CPU, the
load before and after, each side's median seconds and minor page faults per call (the first
``--warmup`` calls left out), their ratio per round and over all rounds, and whether both sides
sampled the same tokens and log-probs (hashes of ``completion_ids`` and ``behaviour_logp``:
bit-identical or not). ``--profile N`` prints each side's top N functions (cProfile, cumulative) of
one call in round 1.

    python benchmarks/speed/sampler_ab.py [--baseline b87d620] [--current ""] [--rounds 3] [--calls 6]
        [--after-steps 2] [--profile 0]
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import io
import json
import os
import pstats
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from step_throughput import checkout, cpu_line, recipe_overrides, remove_checkouts  # noqa: E402


def measure_side(calls: int, prompts: int, group: int, threads: int, after_steps: int, profile: int) -> dict:
    """``calls`` sample calls of the recipe's first step with the ``rlvr`` on the path, after
    ``after_steps`` RL steps (the starting weights put back)."""
    import copy

    import torch

    import rlvr.train.step as step
    from rlvr.config import load_config
    from rlvr.rollout.engine import sample
    from rlvr.train.state import build_policy, build_state, sampling_generator

    torch.set_num_threads(threads)
    cfg = load_config(None, recipe_overrides(prompts, group, "float32", []))
    model, tok = build_policy(cfg, "none")
    st = build_state(cfg, model, tok)
    rows = [p.prompt for p in build_state(cfg, model, tok).next_problems(prompts) for _ in range(group)]
    start = copy.deepcopy(model.state_dict())
    for _ in range(after_steps):
        step.rl_step(st, cfg.train.steps)
    model.load_state_dict(start)

    def call(i: int):
        return sample(model, tok, rows, st.params, version=0, generator=sampling_generator(cfg.train.seed, i))

    seconds, faults, digests = [], [], []
    for i in range(calls):
        f = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        t = time.perf_counter()
        rb = call(i)
        seconds.append(time.perf_counter() - t)
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f)
        h = hashlib.sha256(rb.completion_ids.numpy().tobytes())
        h.update(rb.behaviour_logp.numpy().tobytes())
        digests.append(h.hexdigest()[:16])
    text = ""
    if profile:
        prof = cProfile.Profile()
        prof.enable()
        call(0)
        prof.disable()
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(profile)
        text = buf.getvalue()
    return {"seconds": seconds, "faults": faults, "digests": digests, "profile": text}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default="b87d620")
    ap.add_argument("--current", default="", help="a ref; empty: this working tree")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--calls", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--prompts", type=int, default=64)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--after-steps", type=int, default=2, help="RL steps each side runs before it samples")
    ap.add_argument("--profile", type=int, default=0, help="print each side's top N functions of one call")
    ap.add_argument("--side", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.side:
        Path(args.side).write_text(json.dumps(measure_side(args.calls, args.prompts, args.group, args.threads,
                                                           args.after_steps, args.profile)))
        return {}
    load_before = os.getloadavg()
    results: dict[str, list[dict]] = {"baseline": [], "current": []}
    with tempfile.TemporaryDirectory(prefix="sampler_ab") as tmp_name:
        tmp = Path(tmp_name)
        roots = {"baseline": checkout(tmp / "baseline", args.baseline) if args.baseline else REPO,
                 "current": checkout(tmp / "current", args.current) if args.current else REPO}
        try:
            for r in range(args.rounds):
                for name, root in roots.items():
                    out = tmp / f"{name}{r}.json"
                    env = {**os.environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": str(args.threads)}
                    subprocess.run([sys.executable, __file__, "--side", str(out), "--calls", str(args.calls),
                                    "--prompts", str(args.prompts), "--group", str(args.group), "--threads",
                                    str(args.threads), "--after-steps", str(args.after_steps),
                                    "--profile", str(args.profile if r == 0 else 0)],
                                   env=env, check=True, cwd=root)
                    results[name].append(json.loads(out.read_text()))
                    kept = results[name][-1]["seconds"][args.warmup:]
                    faults = statistics.median(results[name][-1]["faults"][args.warmup:])
                    print(f"round {r + 1}/{args.rounds} {name}: {statistics.median(kept):.3f} s/call "
                          f"({' '.join(f'{s:.3f}' for s in kept)}), {faults:.0f} page faults/call", flush=True)
        finally:
            remove_checkouts(roots.values())
    load_after = os.getloadavg()
    med = {n: statistics.median(s for r in rs for s in r["seconds"][args.warmup:]) for n, rs in results.items()}
    faults = {n: statistics.median(f for r in rs for f in r["faults"][args.warmup:]) for n, rs in results.items()}
    per_round = [statistics.median(b["seconds"][args.warmup:]) / statistics.median(c["seconds"][args.warmup:])
                 for b, c in zip(results["baseline"], results["current"])]
    same = all(b["digests"] == c["digests"] for b, c in zip(results["baseline"], results["current"]))
    for name in results:
        if results[name][0]["profile"]:
            print(f"--- profile, {name}\n{results[name][0]['profile']}")
    names = {"baseline": args.baseline or "the working tree", "current": args.current or "the working tree"}
    print(f"cpu: {cpu_line()}; {args.threads} thread(s) a side")
    print(f"load average before {load_before[0]:.2f} {load_before[1]:.2f}, "
          f"after {load_after[0]:.2f} {load_after[1]:.2f}")
    print(f"sampling {args.prompts} x {args.group} after {args.after_steps} RL step(s), median per call:")
    for name in results:
        print(f"  {name:8s} {names[name]:18s} {med[name]:.3f} s, {faults[name]:.0f} page faults")
    print(f"baseline/current {med['baseline'] / med['current']:.3f}x (per round "
          f"{' '.join(f'{r:.3f}' for r in per_round)}); same tokens and log-probs: {same}")
    record = {"benchmark": "sampler_ab", "cpu": cpu_line(), "after_steps": args.after_steps,
              "load": [round(load_before[0], 2), round(load_after[0], 2)],
              "median_s": {k: round(v, 4) for k, v in med.items()}, "faults": faults,
              "speedup": round(med["baseline"] / med["current"], 3), "per_round": [round(r, 3) for r in per_round],
              "same": same}
    print(json.dumps(record))
    return record


if __name__ == "__main__":
    main()
