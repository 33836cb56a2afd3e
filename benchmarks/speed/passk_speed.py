"""pass@k estimator speed: 500 problems x 1024 samples, every k in 1..1024.

Baseline: the textbook estimator 1 - comb(n-c, k) / comb(n, k) with Python's
exact ``math.comb``, one (problem, k) at a time, timed on the same data in the
same run. Prints seconds for both, the speed-up, the largest difference, and a
final machine-readable JSON line.

    python benchmarks/speed/passk_speed.py [--problems 500] [--n 1024] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import time
from math import comb

import numpy as np

from rlvr.eval.passk import pass_at_k_matrix


def naive(n_per: np.ndarray, c_per: np.ndarray, ks: np.ndarray) -> np.ndarray:
    """(P, K) pass@k with exact big-integer binomials (the baseline)."""
    out = np.empty((len(n_per), len(ks)))
    for p, (n, c) in enumerate(zip(n_per.tolist(), c_per.tolist())):
        for j, k in enumerate(ks.tolist()):
            out[p, j] = 1.0 - comb(n - c, k) / comb(n, k)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", type=int, default=500)
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=5, help="repeats of the fast path (best is kept)")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    n_per = np.full(args.problems, args.n)
    # accuracies spread over [0, 1], with many near 0 and 1 as in real RLVR evaluations
    c_per = np.round(rng.beta(0.5, 0.5, size=args.problems) * args.n).astype(np.int64)
    ks = np.arange(1, args.n + 1)

    fast_s = float("inf")
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        fast = pass_at_k_matrix(n_per, c_per, ks)
        curve = fast.mean(axis=0)
        fast_s = min(fast_s, time.perf_counter() - t0)
    t0 = time.perf_counter()
    slow = naive(n_per, c_per, ks)
    naive_s = time.perf_counter() - t0
    max_diff = float(np.abs(fast - slow).max())

    print(f"problems={args.problems} n={args.n} ks=1..{args.n} ({fast.size} estimates)")
    print(f"rlvr pass_at_k_matrix: {fast_s:.4f} s (best of {args.repeats}); pass@1={curve[0]:.4f}")
    print(f"naive math.comb:       {naive_s:.3f} s")
    print(f"speed-up: {naive_s / fast_s:.1f}x; max |difference| = {max_diff:.2e}; under 1 s: {fast_s < 1.0}")
    result = {
        "benchmark": "passk_speed",
        "problems": args.problems,
        "n": args.n,
        "num_ks": int(ks.size),
        "seconds": round(fast_s, 6),
        "baseline": "math.comb",
        "baseline_seconds": round(naive_s, 4),
        "speedup": round(naive_s / fast_s, 1),
        "max_abs_diff": max_diff,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
