"""``rlvr eval --samples`` on a 1.8 GB samples file against a bare ``json.loads`` loop over it.

Writes (once; reused when present) a synthetic rlvr-format ``samples.jsonl`` of ``--problems`` x
``--n`` samples (default 1000 x 1024 = 1,024,000) whose completions are slices of a pool of words
with lengths drawn around ``--mean-chars`` (default 1,500 characters: about 1.8 GB in all; newlines,
backslashes and quotes escaped as a real dump's are), each row with an answer (the gold for a correct
sample, else one of a few wrong ones or null), reward, correct, num_tokens, mean_logp, mean_entropy
and finish_reason. Then, in this one run, each in its own subprocess (wall time and the child's own
peak RSS from ``os.wait4``):

1. the bare loop: ``for line in open(path): json.loads(line)``, nothing kept;
2. ``python -m rlvr.cli eval --samples PATH --json OUT --quiet`` (of ``--rlvr-root`` when given);
3. the same with ``--ks 1``: the read and the tallies with the least statistics after them (maj@k at
   every default k up to n = 1024 costs far more than reading: this run tells the two apart).

With ``--repeat R`` the three run in turn R times and each keeps its least wall and CPU time (on shared
cores, the runs least disturbed by other jobs). ``--serial-too`` adds a fourth run, the default one with
``--read-workers 1`` (rlvr reads a file this large in several processes by default where it has
several cores). Peak RSS is the child's own (``os.wait4``: the largest of its process tree) and, sampled
every 20 ms, the largest sum over the tree (rlvr and its reading processes together). CPU time is
the tree's. Targets (issue 49): rlvr's peak RSS under 500 MB and its wall time at most 2x the bare loop's.
Prints one line per step and, last, one JSON line with the numbers, the CPU and the load average.

    nice -n 5 python benchmarks/speed/large_samples.py                    # 1,024,000 samples, 1.8 GB
    python benchmarks/speed/large_samples.py --problems 50 --n 64 --path /tmp/small.jsonl   # quick
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

BARE_LOOP = ("import json, sys\n"
             "with open(sys.argv[1], encoding='utf-8') as f:\n    for line in f:\n        json.loads(line)\n")
WORDS = ("the of and to in is we so then let x y n k sum total answer equal therefore since each step "
         "\\frac{1}{2} \\sqrt{3} $x^2$ \"quoted\" = + - * / ( ) 12 7 365 0.5").split()


def write_samples(path: Path, problems: int, n: int, mean_chars: int, seed: int = 0) -> None:
    """The synthetic samples file (module docstring), written to ``path`` through a temp file."""
    rng = random.Random(seed)
    pool = " ".join(rng.choice(WORDS) + ("\n" if rng.random() < 0.05 else "") for _ in range(2_000_000))
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as out:
        for p in range(problems):
            accuracy, gold = rng.random(), str(rng.randint(0, 999))
            wrong = [str(rng.randint(0, 999)) for _ in range(3)]
            lines = []
            for _ in range(n):
                correct = rng.random() < accuracy
                size = max(16, int(rng.lognormvariate(0, 0.35) * mean_chars * 0.94))
                start = rng.randrange(0, len(pool) - size)
                answer = gold if correct else rng.choice(wrong + [None])
                tokens = size // 4
                lines.append(json.dumps({
                    "problem_id": f"p{p:05d}", "completion": pool[start:start + size], "answer": answer,
                    "reward": 1.0 if correct else 0.0, "correct": correct, "num_tokens": tokens,
                    "mean_logp": -rng.random(), "mean_entropy": rng.random() * 2,
                    "finish_reason": "stop" if rng.random() < 0.9 else "length"}, ensure_ascii=False))
            out.write("\n".join(lines) + "\n")
    os.replace(tmp, path)


def tree_rss_kib(pid: int) -> int:
    """The summed VmRSS (KiB) of ``pid`` and its descendants now (0 for those already gone)."""
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        try:
            status = Path(f"/proc/{current}/status").read_text()
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except OSError:
            continue
        total += next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
        todo += [int(child) for child in children]
    return total


def timed(cmd: list[str], env: dict | None = None) -> tuple[float, float, float, float]:
    """(wall seconds, peak RSS MiB, CPU seconds, peak summed RSS MiB) of one subprocess: its RSS and CPU
    (user + system) from ``os.wait4`` (the child and the processes it waited for; RSS the largest of
    them), the sum over its process tree sampled every 20 ms. On shared cores the CPU time moves less
    with the load than the wall time does, so both ratios are printed."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, env=env)
    peak = [0]
    finished = threading.Event()

    def sample() -> None:
        while not finished.wait(0.02):
            peak[0] = max(peak[0], tree_rss_kib(proc.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    finished.set()
    sampler.join()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)} failed with status {os.waitstatus_to_exitcode(status)}")
    return wall, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime, peak[0] / 1024


def cpu_line() -> str:
    """The CPU's model name and the flags that matter for this work (avx2, avx512f), from /proc/cpuinfo."""
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    fields = dict(line.split(":", 1) for line in info.splitlines() if ":" in line)
    fields = {k.strip(): v.strip() for k, v in fields.items()}
    flags = set(fields.get("flags", "").split())
    shown = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16") if f in flags]
    return f"{fields.get('model name', 'unknown')} ({', '.join(shown) or 'no avx2'}), {os.cpu_count()} cores"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--path", default="/tmp/rlvr_large_samples.jsonl")
    ap.add_argument("--problems", type=int, default=1000)
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--mean-chars", type=int, default=1500)
    ap.add_argument("--rewrite", action="store_true", help="write the file even when it exists")
    ap.add_argument("--rlvr-root", help="run the rlvr of this checkout (default: the one importable here)")
    ap.add_argument("--repeat", type=int, default=1, help="rounds of the three runs; the least time of each is kept")
    ap.add_argument("--serial-too", action="store_true", help="also run rlvr with --read-workers 1")
    args = ap.parse_args()
    path = Path(args.path)
    if args.rewrite or not path.is_file():
        start = time.perf_counter()
        write_samples(path, args.problems, args.n, args.mean_chars)
        print(f"wrote {path} in {time.perf_counter() - start:.0f}s", flush=True)
    size_gb = path.stat().st_size / 1e9
    print(f"{path}: {size_gb:.2f} GB", flush=True)
    # -P: the working directory is not put first on the path, so PYTHONPATH decides which rlvr runs
    env = dict(os.environ, PYTHONPATH=args.rlvr_root or str(Path(__file__).resolve().parents[2]))
    out = path.with_name(path.stem + "_eval.json")
    command = [sys.executable, "-P", "-m", "rlvr.cli", "eval", "--samples", str(path), "--json", str(out), "--quiet"]
    runs = {"bare": [sys.executable, "-c", BARE_LOOP, str(path)], "eval": command, "ks1": command + ["--ks", "1"]}
    if args.serial_too:
        runs["serial"] = command + ["--read-workers", "1"]
    measured: dict[str, list[tuple[float, float, float, float]]] = {name: [] for name in runs}
    for round_ in range(args.repeat):  # the runs in turn, so each round meets about the same load
        for name, cmd in runs.items():
            measured[name].append(timed(cmd, None if name == "bare" else env))
            wall, mib, cpu, summed = measured[name][-1]
            print(f"round {round_ + 1} {name}: {wall:.1f}s wall, {cpu:.1f}s CPU, peak RSS {mib:.0f} MiB "
                  f"(summed over its processes {summed:.0f} MiB)", flush=True)
    # the least wall and the least CPU time of each (the runs least disturbed by other jobs), the largest RSS
    wall_s = {name: min(m[0] for m in measured[name]) for name in runs}
    cpu_s = {name: min(m[2] for m in measured[name]) for name in runs}
    summed_mb = {name: max(m[3] for m in measured[name]) for name in runs}
    bare_s, eval_s, read_s = (wall_s[name] for name in ("bare", "eval", "ks1"))
    bare_cpu, eval_cpu, read_cpu = (cpu_s[name] for name in ("bare", "eval", "ks1"))
    bare_mb, eval_mb, read_mb = (max(m[1] for m in measured[name]) for name in ("bare", "eval", "ks1"))
    result = json.loads(out.read_text())
    print(f"bare json.loads loop: {bare_s:.1f}s wall, {bare_cpu:.1f}s CPU, peak RSS {bare_mb:.0f} MiB", flush=True)
    print(f"rlvr eval --samples: {eval_s:.1f}s wall ({eval_s / bare_s:.2f}x the bare loop), {eval_cpu:.1f}s CPU "
          f"({eval_cpu / bare_cpu:.2f}x), peak RSS {eval_mb:.0f} MiB; {result['samples']} samples, "
          f"{result['problems']} problems, pass@1 {result['pass_at_k']['1']:.4f}", flush=True)
    print(f"rlvr eval --samples --ks 1: {read_s:.1f}s wall ({read_s / bare_s:.2f}x the bare loop), {read_cpu:.1f}s "
          f"CPU ({read_cpu / bare_cpu:.2f}x), peak RSS {read_mb:.0f} MiB", flush=True)
    if args.serial_too:
        print(f"rlvr eval --samples --read-workers 1: {wall_s['serial']:.1f}s wall "
              f"({wall_s['serial'] / bare_s:.2f}x the bare loop), {cpu_s['serial']:.1f}s CPU "
              f"({cpu_s['serial'] / bare_cpu:.2f}x), summed peak RSS {summed_mb['serial']:.0f} MiB", flush=True)
    print(f"peak RSS summed over each run's processes: eval {summed_mb['eval']:.0f} MiB, --ks 1 "
          f"{summed_mb['ks1']:.0f} MiB", flush=True)
    row = {"benchmark": "large_samples", "file_gb": round(size_gb, 2), "samples": result["samples"],
           "bare_s": round(bare_s, 2), "bare_rss_mib": round(bare_mb), "eval_s": round(eval_s, 2),
           "eval_rss_mib": round(eval_mb), "ratio": round(eval_s / bare_s, 2), "ks1_s": round(read_s, 2),
           "ks1_rss_mib": round(read_mb), "ks1_ratio": round(read_s / bare_s, 2), "bare_cpu_s": round(bare_cpu, 2),
           "eval_cpu_s": round(eval_cpu, 2), "cpu_ratio": round(eval_cpu / bare_cpu, 2),
           "ks1_cpu_s": round(read_cpu, 2), "ks1_cpu_ratio": round(read_cpu / bare_cpu, 2),
           "eval_summed_rss_mib": round(summed_mb["eval"]), "ks1_summed_rss_mib": round(summed_mb["ks1"]),
           **({"serial_s": round(wall_s["serial"], 2), "serial_cpu_s": round(cpu_s["serial"], 2),
               "serial_ratio": round(wall_s["serial"] / bare_s, 2), "serial_summed_rss_mib": round(summed_mb["serial"])}
              if args.serial_too else {}),
           "under_targets": max(eval_mb, summed_mb["eval"]) < 500 and eval_s <= 2 * bare_s, "cpu": cpu_line(),
           "load_avg": [round(x, 2) for x in os.getloadavg()], "nice": os.nice(0), "repeat": args.repeat}
    print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
