"""Evaluation cells side by side against one after the other, in one run (issue 50: the
evaluation-heavy parts of `rlvr reproduce`, e.g. boundary_powered's 576 x 1024 cells; issue 53's
"lab throughput").

`rlvr reproduce --jobs J` trains J models at once, one process and cores/J torch threads each, and
runs its evaluations one after the other in the main process on every core. This measures whether
running them side by side instead (one process and cores/J threads each) would gain, with the
evaluation's own code (:func:`rlvr.experiments.evaluate.sample_chunks`: the default base of the
quickstart config, held-out problems, T = 0.6, top-p 0.95, the experiments' sampling seed) on
``--cells`` cells of ``--problems`` x ``--n`` samples each (cell i samples held-out problems
i*P .. (i+1)*P - 1). Measured 0.95x on a quiet Zen 5 at 16 x 1024 (docs/performance.md, "Evaluation
cells side by side"): not adopted.

- serial: one process with ``cores`` torch threads samples the cells one after the other;
- side by side: ``--cells`` processes with ``cores // cells`` thread(s) each, one cell each, at once.

Each form runs ``--rounds`` times, alternating, in fresh processes (so the machine's load weighs on
both); printed: the CPU, the load before and after, each round's wall seconds and ratio, the ratio of
medians, and whether the two forms drew the same tokens (a thread count may change float sums and so
a draw: the samples are then equally valid draws, not the same ones; the cells' keys do not name a
thread count).

    python benchmarks/speed/eval_jobs.py [--cells 2] [--problems 16] [--n 1024] [--rounds 2]   # about 90 s
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from step_throughput import cpu_line  # noqa: E402


def sample_cells(first: int, count: int, problems: int, n: int, threads: int, out: str, base: str = "",
                 overrides: tuple[str, ...] = ()) -> dict:
    """Cells ``first`` .. ``first + count - 1`` one after the other on ``threads`` torch threads, of
    ``base`` (default: the quickstart config's cached base) ->
    {"wall_s", "hashes"} (per cell, sha256 of its sampled rows' completions, in order)."""
    import torch

    from rlvr.config import load_config
    from rlvr.experiments.evaluate import sample_chunks
    from rlvr.experiments.runner import SAMPLING_SEED
    from rlvr.train.pretrain import base_model
    from rlvr.train.state import get_task

    torch.set_num_threads(threads)
    cfg = load_config(None, ["model.dtype=float32", *overrides])
    base = base or base_model(cfg.model, cfg.pretrain, "none")
    task = get_task(cfg)
    every = task.problems("heldout", (first + count) * problems)
    hashes = []
    t = time.perf_counter()
    for i in range(first, first + count):
        paths = sample_chunks(base, cfg, task, every[i * problems:(i + 1) * problems], n, 0.6, 0.95,
                              SAMPLING_SEED, Path(out) / f"cell{i}")
        h = hashlib.sha256()
        for p in paths:
            for line in open(p):
                h.update(json.loads(line)["completion"].encode())
        hashes.append(h.hexdigest()[:12])
    return {"wall_s": time.perf_counter() - t, "hashes": hashes}


def run_side(first: int, count: int, problems: int, n: int, threads: int, out: str) -> subprocess.Popen:
    """A fresh process sampling :func:`sample_cells` into ``out`` on ``threads`` threads."""
    code = (f"import json, sys; sys.path.insert(0, {str(Path(__file__).resolve().parent)!r}); "
            f"from eval_jobs import sample_cells; "
            f"print(json.dumps(sample_cells({first}, {count}, {problems}, {n}, {threads}, {out!r})))")
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS=str(threads))
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, env=env, text=True, cwd=REPO)


def result(p: subprocess.Popen) -> dict:
    out, _ = p.communicate()
    if p.returncode:
        raise SystemExit(f"a side failed (rc {p.returncode})")
    return json.loads(out.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", type=int, default=2, help="evaluation cells (= processes side by side; default 2)")
    ap.add_argument("--problems", type=int, default=16, help="held-out problems per cell (default 16)")
    ap.add_argument("--n", type=int, default=1024, help="samples per problem (default 1024)")
    ap.add_argument("--rounds", type=int, default=2, help="rounds, each form once per round (default 2)")
    a = ap.parse_args(argv)
    for name in ("cells", "problems", "n", "rounds"):
        if getattr(a, name) < 1:
            ap.error(f"--{name} must be >= 1 (got {getattr(a, name)})")
    cores = os.cpu_count() or 1
    side_threads = max(1, cores // a.cells)
    print(cpu_line())
    print(f"load before: {os.getloadavg()[0]:.2f}; {a.cells} cells of {a.problems} problems x {a.n} samples; "
          f"serial: 1 process x {cores} thread(s); side by side: {a.cells} processes x {side_threads} thread(s)")
    serial, side, same = [], [], []
    with tempfile.TemporaryDirectory(prefix="eval_jobs_") as tmp:  # the samples: removed afterwards
        result(run_side(0, 1, 1, 1, cores, f"{tmp}/warm"))  # the base cache (pretrained once, outside the timing)
        for r in range(a.rounds):
            s = result(run_side(0, a.cells, a.problems, a.n, cores, f"{tmp}/serial{r}"))
            t = time.perf_counter()
            procs = [run_side(i, 1, a.problems, a.n, side_threads, f"{tmp}/side{r}") for i in range(a.cells)]
            res = [result(p) for p in procs]
            wall = time.perf_counter() - t  # includes each process's start (the runner's workers pay it too)
            serial.append(s["wall_s"])
            side.append(wall)
            same.append(s["hashes"] == [x["hashes"][0] for x in res])
            cell_walls = ", ".join(f"{x['wall_s']:.1f}" for x in res)
            print(f"round {r + 1}: serial {s['wall_s']:.1f} s, side by side {wall:.1f} s "
                  f"(cells {cell_walls}): {s['wall_s'] / wall:.2f}x")
    ms, md = statistics.median(serial), statistics.median(side)
    print(f"load after: {os.getloadavg()[0]:.2f}")
    print(f"median: serial {ms:.1f} s, side by side {md:.1f} s -> side by side {ms / md:.2f}x")
    print(f"same tokens ({cores} thread(s) vs {side_threads}): {'yes' if all(same) else 'no'} "
          f"(rounds {', '.join('yes' if x else 'no' for x in same)})")
    print(json.dumps({"serial_s": ms, "side_s": md, "ratio": ms / md, "cores": cores}))


if __name__ == "__main__":
    main()
