"""Memory soak: train the tiny model for ``--minutes`` and sample the trainer's RSS every N steps.

The trainer is ``rlvr train`` in a child process (tiny config, checkpoints and held-out evaluation
on, unlimited steps); this process polls its ``metrics.jsonl`` and reads the child's RSS (psutil,
including any reward-pool workers it forked) each time another ``--every`` steps are logged. After
the time is up the child is stopped with SIGINT. Reported: RSS at the end of warm-up (the first
``--warmup`` fraction of the samples), at the end, the growth between the two, and the least-squares
slope after warm-up in MB per 1000 steps. Exits 1 if the growth exceeds ``--max-growth-mb``.
Prints a table of samples and a final machine-readable JSON line.

    python benchmarks/checks/memory_soak.py --minutes 30          # the soak
    python benchmarks/checks/memory_soak.py --minutes 2           # quick mode
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

TINY = ["model.n_layer=1", "model.d_model=32", "model.n_head=2", "pretrain.tokens=20000",
        "pretrain.batch_size=16", "pretrain.seq_len=64", "algo.prompts_per_step=4", "algo.group_size=4",
        "sampling.max_new_tokens=24", "sampling.interruption_budget=16", "train.eval_problems=8",
        "algo.overlong_cache=12", "log.progress=none"]


def rss_mb(pid: int) -> float:
    """RSS of ``pid`` and its children, MB."""
    import psutil

    try:
        p = psutil.Process(pid)
        procs = [p, *p.children(recursive=True)]
    except psutil.NoSuchProcess:
        return float("nan")
    total = 0
    for q in procs:
        try:
            total += q.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total / 2**20


class LineCounter:
    """Lines in a growing file, reading only the new bytes on each call."""

    def __init__(self, path: Path):
        self.path, self.offset, self.lines = path, 0, 0

    def __call__(self) -> int:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                chunk = f.read()
        except OSError:
            return self.lines
        self.offset += len(chunk)
        self.lines += chunk.count(b"\n")
        return self.lines


def slope_per_1000(samples: list[dict]) -> float:
    """Least-squares d(RSS)/d(step) x 1000 (MB per 1000 steps)."""
    if len(samples) < 2:
        return float("nan")
    xs, ys = [s["step"] for s in samples], [s["rss_mb"] for s in samples]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    var = sum((x - mx) ** 2 for x in xs)
    return 1000 * sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / var if var else float("nan")


def soak(args) -> tuple[list[dict], int]:
    out = Path(args.out)
    run = out / "run"
    cmd = [sys.executable, "-m", "rlvr.cli", "train", "quickstart", *TINY, "train.steps=100000000",
           f"train.checkpoint_every={args.checkpoint_every}", f"train.eval_every={args.checkpoint_every}",
           "train.keep_last=2", "--run-dir", str(run)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    with open(out / "trainer.log", "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    t0, samples, next_step, count = time.monotonic(), [], args.every, LineCounter(run / "metrics.jsonl")
    try:
        while proc.poll() is None and time.monotonic() - t0 < args.minutes * 60:
            steps = count()
            if steps >= next_step:
                samples.append({"step": steps, "t_s": round(time.monotonic() - t0, 1),
                                "rss_mb": round(rss_mb(proc.pid), 1)})
                next_step = steps + args.every
            time.sleep(0.5)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    return samples, proc.returncode


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--every", type=int, default=10, help="sample RSS every this many steps")
    ap.add_argument("--checkpoint-every", type=int, default=25, help="checkpoint and evaluate this often")
    ap.add_argument("--warmup", type=float, default=0.2, help="fraction of samples treated as warm-up")
    ap.add_argument("--max-growth-mb", type=float, default=50.0)
    ap.add_argument("--out", default="/tmp/memory_soak")
    args = ap.parse_args()
    out = Path(args.out)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    samples, rc = soak(args)
    for s in samples[:: max(1, len(samples) // 40)] + samples[-1:]:
        print(f"step {s['step']:>7}  t {s['t_s']:>7.1f}s  rss {s['rss_mb']:>8.1f} MB")
    if len(samples) < 3:
        print(json.dumps({"benchmark": "memory_soak", "ok": False, "samples": len(samples),
                          "error": f"too few samples (trainer rc={rc}); see {out / 'trainer.log'}"}))
        return 1
    w = max(1, int(len(samples) * args.warmup))
    after = samples[w - 1:]
    growth = after[-1]["rss_mb"] - after[0]["rss_mb"]
    res = {"benchmark": "memory_soak", "minutes": args.minutes, "steps": samples[-1]["step"],
           "samples": len(samples), "rss_start_mb": samples[0]["rss_mb"], "rss_warm_mb": after[0]["rss_mb"],
           "rss_end_mb": after[-1]["rss_mb"], "rss_max_mb": max(s["rss_mb"] for s in samples),
           "growth_after_warmup_mb": round(growth, 1),
           "slope_mb_per_1000_steps": round(slope_per_1000(after), 2), "trainer_rc": rc,
           "ok": growth <= args.max_growth_mb}
    (out / "soak.json").write_text(json.dumps({"result": res, "samples": samples}, indent=1))
    print(json.dumps(res))
    return 0 if res["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
