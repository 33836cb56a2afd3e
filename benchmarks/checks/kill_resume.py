"""Kill/resume: SIGKILL ``rlvr train`` at random moments, some inside a checkpoint write, resume each time.

An uninterrupted deterministic run (``train.deterministic=true``) is the reference. The same run is
then started, killed with SIGKILL ``--kills`` times (a share of them while a ``.tmp_step_*``
directory exists, i.e. during the checkpoint write; the rest at uniform random times), resumed with
``rlvr train --resume RUN`` after each kill, and finally run to the end. Checked at the end: every
metric except the wall-clock ones (``rlvr.analysis.metric_series.WALL_CLOCK_KEYS``) equals the
reference's, ``metrics.jsonl`` has steps 1..N once each, no ``.tmp_step_*`` is left, and the final
checkpoint verifies, loads and has bit-identical weights to the reference's.

The trainer processes run ``rlvr.cli.main(["train", ...])`` with the checkpoint hashing slowed by
``--slow-ckpt`` seconds per file (only so that a kill can land inside the short write window on
a tiny model; nothing else is changed). Prints a table and a final machine-readable JSON line.

    python benchmarks/checks/kill_resume.py [--kills 10] [--steps 12] [--seed 0] [--out /tmp/kill_resume]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from rlvr.analysis.metric_series import without_wall_clock

TINY = ["model.n_layer=1", "model.d_model=32", "model.n_head=2", "pretrain.tokens=20000",
        "pretrain.batch_size=16", "pretrain.seq_len=64", "algo.prompts_per_step=4", "algo.group_size=4",
        "sampling.max_new_tokens=24", "sampling.interruption_budget=16", "train.eval_problems=8",
        "algo.overlong_cache=12", "train.deterministic=true", "log.progress=none"]


def child_main(argv: list[str]) -> int:
    """``rlvr train ARGS`` with the checkpoint hashing slowed (``RLVR_SLOW_CKPT_S`` seconds per file)."""
    import torch

    import rlvr.train.checkpoint as ck

    torch.set_num_threads(1)
    slow = float(os.environ.get("RLVR_SLOW_CKPT_S", "0"))
    if slow > 0:
        orig = ck._sha256

        def slow_sha256(path: Path) -> str:
            time.sleep(slow)
            return orig(path)

        ck._sha256 = slow_sha256
    from rlvr.cli import main

    return main(["train", *argv])


def launch(args: list[str], log: Path, slow: float) -> subprocess.Popen:
    env = dict(os.environ, RLVR_SLOW_CKPT_S=str(slow), PYTHONUNBUFFERED="1")
    with open(log, "a") as fh:
        return subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--child", *args], env=env,
                                stdout=fh, stderr=subprocess.STDOUT, cwd=Path(__file__).resolve().parents[2])


def tmp_dirs(run: Path) -> list[Path]:
    root = run / "checkpoints"
    return sorted(root.glob(".tmp_step_*")) if root.exists() else []


def good_step(run: Path) -> int | None:
    """Step of the newest checkpoint that verifies (quietly; None if none)."""
    from rlvr.train.checkpoint import list_checkpoints, verify_checkpoint

    for c in reversed(list_checkpoints(run / "checkpoints")):
        if verify_checkpoint(c) is None:
            return int(c.name.split("_")[1])
    return None


def metric_steps(run: Path) -> list[int]:
    from rlvr.log import read_metrics

    return [r["step"] for r in read_metrics(run)]


def start_args(run: Path, steps: int, ckpt_every: int, seed: int) -> list[str]:
    if (run / "config.yaml").exists():
        return ["--resume", str(run)]
    return ["quickstart", *TINY, f"train.steps={steps}", f"train.checkpoint_every={ckpt_every}",
            f"train.seed={seed}", "train.eval_every=4", "train.keep_last=2", "--run-dir", str(run)]


def fresh_tmp(run: Path, since: float) -> list[Path]:
    """``.tmp_step_*`` dirs holding a file written after ``since`` (wall clock): the checkpoint this
    trainer process is writing, not a leftover of a killed one."""
    out = []
    for d in tmp_dirs(run):
        with contextlib.suppress(OSError):
            if any(f.stat().st_mtime > since for f in d.iterdir()):
                out.append(d)
    return out


def kill_once(run: Path, mode: str, delay: float, args, log: Path, target: str = "") -> dict:
    """Start (or resume) the run and SIGKILL it at the chosen moment ("checkpoint": ``delay`` s after
    the ``target`` checkpoint write begins; else ``delay`` s after launch); what the run dir looked like."""
    before, since = good_step(run), time.time()
    proc = launch(start_args(run, args.steps, args.checkpoint_every, args.seed), log, args.slow_ckpt)
    t0, seen = time.monotonic(), None
    while proc.poll() is None:
        now = time.monotonic() - t0
        if mode == "checkpoint":
            if seen is None and any(d.name == target for d in fresh_tmp(run, since)):
                seen = now
            if seen is not None and now - seen >= delay:
                break
        elif now >= delay:
            break
        time.sleep(0.002)
    live = fresh_tmp(run, since)
    files = sorted(p.name for d in live for p in d.iterdir())
    finished = proc.poll() is not None
    if not finished:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    steps = metric_steps(run)
    return {"mode": mode, "at_s": round(time.monotonic() - t0, 2), "killed": not finished, "rc": proc.returncode,
            "resumed_from": before, "target": target if mode == "checkpoint" else "",
            "tmp_at_kill": [d.name for d in live], "tmp_files": files,
            "good_ckpt": good_step(run), "metric_steps": len(steps), "last_step": steps[-1] if steps else 0}


def run_to_end(run: Path, args, log: Path) -> tuple[int, float]:
    """Run (or resume) to the end -> (exit code, seconds from launch to the first new metrics line)."""
    n0 = len(metric_steps(run))
    proc = launch(start_args(run, args.steps, args.checkpoint_every, args.seed), log, 0.0)
    t0, first = time.monotonic(), None
    while proc.poll() is None:
        if first is None and len(metric_steps(run)) > n0:
            first = time.monotonic() - t0
        time.sleep(0.05)
    return proc.returncode, first if first is not None else time.monotonic() - t0


def final_checks(ref: Path, run: Path, steps: int) -> dict:
    import torch
    from safetensors.torch import load_file

    from rlvr.log import read_metrics
    from rlvr.model.io import load_policy
    from rlvr.train.checkpoint import latest_good_checkpoint

    a, b = without_wall_clock(read_metrics(ref)), without_wall_clock(read_metrics(run))
    diff = [k for ra, rb in zip(a, b) for k in set(ra) | set(rb) if ra.get(k) != rb.get(k)]
    ca, cb = latest_good_checkpoint(ref), latest_good_checkpoint(run)
    wa, wb = load_file(str(ca / "model.safetensors")), load_file(str(cb / "model.safetensors"))
    model, _ = load_policy(cb)  # the final checkpoint loads as a policy
    same_w = wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    got = [r["step"] for r in b]
    return {"metrics_equal": a == b, "differing_keys": sorted(set(diff))[:10], "steps_ok": got == list(
        range(1, steps + 1)), "duplicates": len(got) - len(set(got)), "final_ckpt": cb.name,
        "weights_equal": same_w, "tmp_left": [d.name for d in tmp_dirs(run)],
        "loaded_params": sum(p.numel() for p in model.parameters())}


def table(rows: list[dict]) -> str:
    head = ("| # | kill moment (target) | started from ckpt | killed at (s after launch) | checkpoint being written "
            "(files so far) | last good ckpt after kill | metric lines |")
    out = [head, "|---|---|---|---|---|---|---|"]
    for i, r in enumerate(rows, 1):
        writing = f"{','.join(r['tmp_at_kill'])} ({len(r['tmp_files'])})" if r["tmp_at_kill"] else "-"
        tgt = f" ({r['target'][5:]})" if r["target"] else ""
        at = f"{r['at_s']}{'' if r['killed'] else ' (had exited)'}"
        out.append(f"| {i} | {r['mode']}{tgt} | {r['resumed_from']} | {at} | {writing} | {r['good_ckpt']} | "
                   f"{r['metric_steps']} |")
    return "\n".join(out)


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        return child_main(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--during-checkpoint", type=int, default=4, help="how many kills target a checkpoint write")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--checkpoint-every", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0, help="run seed and kill-schedule seed")
    ap.add_argument("--slow-ckpt", type=float, default=0.15, help="seconds added per checkpoint file hashed")
    ap.add_argument("--out", default="/tmp/kill_resume")
    args = ap.parse_args()
    out = Path(args.out)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    os.environ.setdefault("RLVR_CACHE", str(out / "cache"))
    log = out / "trainer.log"
    t0 = time.monotonic()
    ref = out / "reference"
    rc, t_start = run_to_end(ref, args, log)
    t_ref = time.monotonic() - t0
    if rc != 0:
        print(f"reference run failed (rc={rc}); see {log}", file=sys.stderr)
        return 1
    rng = random.Random(args.seed)
    modes = ["checkpoint"] * args.during_checkpoint + ["time"] * (args.kills - args.during_checkpoint)
    rng.shuffle(modes)
    run, rows = out / "killed", []
    for mode in modes:
        done = good_step(run) or 0
        left = [k for k in range(done + 1, args.steps + 1) if k % args.checkpoint_every == 0]
        target = f".tmp_step_{rng.choice(left):06d}" if left else ""
        if mode == "checkpoint":  # somewhere inside the write of a random later checkpoint
            delay = rng.uniform(0.0, 5 * args.slow_ckpt)
        elif rng.random() < 0.25:  # during start-up (imports, model load, resume) or the first step
            mode, delay = "startup", rng.uniform(0.0, t_start)
        else:  # while training: anywhere in what is left of the run
            delay = t_start + rng.uniform(0.0, (t_ref - t_start) * (args.steps - done) / args.steps)
        rows.append(kill_once(run, mode, delay, args, log, target))
    rc, _ = run_to_end(run, args, log)
    checks = final_checks(ref, run, args.steps)
    print(table(rows))
    ok = rc == 0 and checks["metrics_equal"] and checks["steps_ok"] and checks["weights_equal"] and not checks[
        "tmp_left"]
    print(f"reference run {t_ref:.1f}s (first step logged after {t_start:.1f}s); final resume rc={rc}; "
          f"checks: {json.dumps(checks)}")
    during = sum(bool(r["tmp_at_kill"]) and r["killed"] for r in rows)
    print(json.dumps({"benchmark": "kill_resume", "kills": sum(r["killed"] for r in rows),
                      "kills_during_checkpoint_write": during, "steps": args.steps, **checks, "ok": ok,
                      "wall_s": round(time.monotonic() - t0, 1)}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
