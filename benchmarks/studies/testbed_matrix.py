"""The testbed matrix: does the default `rlvr run` hold across pretraining seeds, RL seeds and
precisions? (docs/results.md, "The testbed matrix")

Each cell is one real `rlvr run` (a subprocess, as a user runs it) with `pretrain.seed=P
train.seed=R model.dtype=D` plus any extra overrides; the cells of one pretraining seed share that
seed's base model, pretrained first (one `rlvr pretrain` per seed, timed). A cell's result is
saved in OUT/cells/<cell>/cell.json when its run ends, so a killed matrix resumes where it stopped
(finished cells are read back, an unfinished cell is run again from the cached base). Cells run
`--workers` at a time, each with cores/workers torch threads.

Checks, each computed from the cells (docs/methods/testbed.md; the cell results, the checks and the
table are :mod:`rlvr.analysis.testbed_matrix`):
  gain      held-out pass@1 trained - base >= --min-gain in every cell (200 problems x 16 samples)
  base      base pass@1 in [0.10, 0.35] in every cell
  curve     the held-out curve does not fall over the last third of training (rlvr.analysis.trend)
  retention the base's retention accuracy in [0.2, 0.8] (greedy, non-degenerate)

    python benchmarks/studies/testbed_matrix.py [--pretrain-seeds 0,1,2] [--rl-seeds 0,1] [--dtypes machine]
        [--workers 2] [--out runs/testbed_matrix] [k=v ...]

--dtypes: comma list of float32 / bfloat16, or "machine" (default): float32, plus bfloat16 where
model.dtype=auto picks it on this machine. Writes OUT/matrix.json and OUT/matrix.md (the table of
docs/results.md) and prints min / median / max gain. Exit 0 when every check passes, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from rlvr.analysis.testbed_matrix import cell_result, checks, markdown

ROOT = Path(__file__).resolve().parents[2]  # the repository
QUICK = ["model.n_layer=1", "model.d_model=32", "model.n_head=2", "model.context=64", "pretrain.tokens=20000",
         "pretrain.batch_size=8", "pretrain.warmup_steps=2", "train.steps=3", "train.eval_every=1",
         "train.eval_problems=8", "train.final_eval_samples=2", "task.retention_problems=8",
         "algo.prompts_per_step=4", "algo.group_size=4", "sampling.max_new_tokens=16",
         "sampling.interruption_budget=12"]


def cell_name(p: int, r: int, dtype: str) -> str:
    return f"p{p}-r{r}-{dtype}"


def machine_dtypes() -> list[str]:
    """float32, plus bfloat16 where `model.dtype=auto` resolves to it for the default model here."""
    from rlvr.config import ModelConfig
    from rlvr.model.bf16_probe import tiny_spec
    from rlvr.model.precision import resolve_dtype

    auto = resolve_dtype("auto", "cpu", tiny_spec(ModelConfig())).dtype
    return ["float32"] + (["bfloat16"] if auto == "bfloat16" else [])


def _env(threads: int) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    env.pop("RLVR_AUTO_DTYPE", None)  # the cell's dtype is explicit; nothing pins it
    return env


def _rlvr(args: list[str], log: Path, threads: int) -> float:
    """Run `rlvr ARGS` with its output in ``log``; -> wall seconds. Raises on a non-zero exit."""
    t0 = time.time()
    with log.open("w") as f:
        rc = subprocess.call([sys.executable, "-m", "rlvr.cli", *args], stdout=f, stderr=subprocess.STDOUT,
                             env=_env(threads), cwd=ROOT)
    if rc != 0:
        tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-15:])
        raise RuntimeError(f"rlvr {' '.join(args)} exited {rc}; log {log}:\n{tail}")
    return time.time() - t0


def pretrain_base(out: Path, p: int, overrides: list[str], threads: int) -> dict:
    """Pretrain (or find cached) the base of pretraining seed ``p``; its wall time is recorded once."""
    d = out / "bases" / f"p{p}"
    done = d / "base.json"
    if done.exists():
        return json.loads(done.read_text())
    d.mkdir(parents=True, exist_ok=True)
    wall = _rlvr(["pretrain", "quickstart", f"pretrain.seed={p}", *overrides, "--plain"], d / "pretrain.log",
                 threads)
    path = (d / "pretrain.log").read_text().strip().splitlines()[-1]
    info = {"seed": p, "path": path, "wall_s": wall}
    done.write_text(json.dumps(info, indent=1))
    return info


def run_cell(out: Path, p: int, r: int, dtype: str, overrides: list[str], threads: int) -> dict:
    d = out / "cells" / cell_name(p, r, dtype)
    done = d / "cell.json"
    if done.exists():
        return json.loads(done.read_text())
    d.mkdir(parents=True, exist_ok=True)
    run = d / "run"
    if run.exists():  # a killed cell: run it again (its base is cached)
        import shutil

        shutil.rmtree(run)
    args = ["run", "quickstart", f"pretrain.seed={p}", f"train.seed={r}", f"model.dtype={dtype}", *overrides,
            "--run-dir", str(run), "--plain"]
    wall = _rlvr(args, d / "run.log", threads)
    res = {"pretrain_seed": p, "rl_seed": r, "dtype": dtype, "wall_s": wall, **cell_result(run)}
    from rlvr.paths import atomic_write

    atomic_write(done, json.dumps(res, indent=1))
    return res


def plot_curves(cells: list[dict], path: Path) -> Path | None:
    """The periodic held-out pass rate of every cell on one figure (PNG); None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(6, 3.8))
    for c in cells:
        steps, rates = zip(*c["curve_points"]) if c["curve_points"] else ((), ())
        ax.plot(steps, rates, marker=".", label=f"pretrain {c['pretrain_seed']}, RL {c['rl_seed']}, {c['precision']}")
    ax.set_xlabel("RL step")
    ax.set_ylabel("held-out pass rate (periodic)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pretrain-seeds", default="0,1,2")
    ap.add_argument("--rl-seeds", default="0,1")
    ap.add_argument("--dtypes", default="machine", help="float32,bfloat16 or 'machine' (see the docstring)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--min-gain", type=float, default=0.20)
    ap.add_argument("--out", default=str(ROOT / "runs" / "testbed_matrix"))
    ap.add_argument("--quick", action="store_true", help="a miniature (tiny model, 3 steps): checks the plumbing")
    ap.add_argument("overrides", nargs="*", help="extra k=v overrides for every cell and base")
    a = ap.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    overrides = (QUICK if a.quick else []) + a.overrides
    ps = [int(x) for x in a.pretrain_seeds.split(",")]
    rs = [int(x) for x in a.rl_seeds.split(",")]
    dtypes = machine_dtypes() if a.dtypes == "machine" else a.dtypes.split(",")
    workers = max(1, a.workers)
    threads = max(1, (os.cpu_count() or 1) // workers)
    t0 = time.time()
    grid = [(p, r, d) for d in dtypes for p in ps for r in rs]
    bases, results = {}, {}
    with ThreadPoolExecutor(workers) as pool:  # the subprocesses do the work; threads only wait
        base_jobs = {pool.submit(pretrain_base, out, p, overrides, threads): p for p in ps}
        cell_jobs = {}
        for f in as_completed(base_jobs):  # a seed's cells queue as soon as its base exists
            p = base_jobs[f]
            bases[p] = f.result()
            print(f"base p{p} ready: {bases[p]['wall_s']:.0f}s to pretrain ({time.time() - t0:.0f}s)", flush=True)
            for cell in (c for c in grid if c[0] == p):
                cell_jobs[pool.submit(run_cell, out, *cell, overrides, threads)] = cell
        for i, f in enumerate(as_completed(cell_jobs), 1):
            p, r, d = cell_jobs[f]
            c = results[(p, r, d)] = f.result()
            print(f"[{i}/{len(grid)}] {cell_name(p, r, d)}: base {c['base_pass1']:.3f} -> {c['trained_pass1']:.3f} "
                  f"({c['gain']:+.3f}), curve falls: {c['curve']['falls']}, {time.time() - t0:.0f}s", flush=True)
    cells = [results[g] for g in grid]
    from rlvr.machine import machine_line

    m = cells[0].get("machine") or {}
    command = "python benchmarks/studies/testbed_matrix.py " + " ".join(argv if argv is not None else sys.argv[1:])
    text = markdown(cells, bases, a.min_gain, machine_line({**m, "precision": ",".join(dtypes)}), command.strip())
    (out / "matrix.md").write_text(text)
    plot_curves(cells, out / "curves.png")
    verdicts = checks(cells, a.min_gain)
    (out / "matrix.json").write_text(json.dumps({"cells": cells, "bases": bases, "checks": verdicts}, indent=1))
    print(text)
    return 0 if all(verdicts.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
