"""Several runs of the tiny recipe sharing one device: RL steps per second of K concurrent runs.

For the scalerl_bend protocol (issue 53): when a GPU is lent, measure first whether K runs of the
recipe at 64 prompts x 8 samples, each its own `rlvr train` process on the same GPU, finish more steps
per second in all than one core each would (the Zen 4's 64 x 8 step: 1.78 s, 0.56 steps/s a core);
use the GPU for the protocol only if it pays. The base is pretrained (cached) by a 1-step warm-up
run before the timed launches, so concurrent runs do not race to pretrain it.

Per run the step time is the median of the differences of `metrics.jsonl`'s `wall_s` from the third
step on (the first steps warm up); the aggregate is the sum over runs of 1 / step time.

    python benchmarks/speed/shared_runs.py --device cuda --runs 1,2,4,8 --steps 20
    python benchmarks/speed/shared_runs.py --device cpu --runs 1 --steps 4   # a smoke run on a CPU

Without CUDA, ``--device cuda`` prints one SKIP line and exits 0. The last line is JSON (all rows).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ZEN4_STEP_S = 1.78  # the 64 x 8 recipe's RL step on one Zen 4 core (scalerl's bs64 arm: 17.8 min / 600 steps)
RECIPE = ["optim.lr=1.0e-4", "optim.schedule=constant", "algo.prompts_per_step=64", "algo.group_size=8",
          "train.eval_every=100000", "train.checkpoint_every=100000", "train.eval_problems=4"]


def step_seconds(walls: list[float], skip: int = 2) -> float:
    """Median seconds per step from a run's cumulative ``wall_s`` per step (N,), the first ``skip``
    steps left out (warm-up); NaN with fewer than two steps left."""
    diffs = [b - a for a, b in zip(walls[skip:], walls[skip + 1:])]
    return statistics.median(diffs) if diffs else float("nan")


def train_command(device: str, steps: int, seed: int, run_dir: Path) -> list[str]:
    return [sys.executable, "-m", "rlvr.cli", "train", "quickstart", *RECIPE, f"train.steps={steps}",
            f"train.device={device}", f"train.seed={seed}", "--run-dir", str(run_dir), "--quiet"]


def run_concurrently(device: str, k: int, steps: int, root: Path) -> list[float]:
    """Seconds per step of each of ``k`` concurrent runs."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    dirs = [root / f"k{k}" / f"run{i}" for i in range(k)]
    procs = [subprocess.Popen(train_command(device, steps, i, d), env=env) for i, d in enumerate(dirs)]
    if any(p.wait() != 0 for p in procs):
        raise RuntimeError(f"a run of the K = {k} batch failed")
    return [step_seconds([json.loads(x)["wall_s"] for x in (d / "metrics.jsonl").read_text().splitlines()])
            for d in dirs]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="shared_runs.py", description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda", help="cuda | cuda:N | cpu")
    ap.add_argument("--runs", default="1,2,4,8", help="comma-separated numbers of concurrent runs")
    ap.add_argument("--steps", type=int, default=20, help="RL steps of each run")
    a = ap.parse_args(argv)
    if a.device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            print("cuda SKIP no CUDA")
            return 0
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        subprocess.run(train_command(a.device, 1, 0, root / "warmup"), check=True)  # pretrains the base once
        for k in (int(x) for x in a.runs.split(",")):
            per_run = run_concurrently(a.device, k, a.steps, root)
            total = sum(1.0 / s for s in per_run)
            rows.append({"runs": k, "step_s": statistics.median(per_run), "steps_per_s": total,
                         "vs_one_zen4_core": total * ZEN4_STEP_S})
            print(f"K={k:2d}  step {rows[-1]['step_s']:.3f} s a run  {total:.2f} steps/s in all  "
                  f"{rows[-1]['vs_one_zen4_core']:.1f}x one Zen 4 core ({a.device})", flush=True)
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
