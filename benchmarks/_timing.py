"""Timing helpers shared by the benchmarks: the machine's matmul peak and a warmed-up median."""

from __future__ import annotations

import statistics
import time


def matmul_peak(dtype=None, sizes=(512, 1024, 2048), reps=10) -> float:
    """Best FLOP/s of square ``dtype`` (default float32) matmuls on this machine, one warm-up each."""
    import torch

    dtype = dtype or torch.float32
    best = 0.0
    for n in sizes:
        a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
        a @ b
        t = time.perf_counter()
        for _ in range(reps):
            a @ b
        best = max(best, 2 * n**3 * reps / (time.perf_counter() - t))
    return best


def median_time(fn, repeats: int) -> float:
    """Median wall seconds of ``repeats`` calls of ``fn`` after one warm-up call."""
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def adding_time(fn, name: str, into: dict):
    """``fn`` that also adds its wall seconds to ``into[name]`` (a defaultdict(float)) on each call:
    to time a function in place, e.g. the RL step's ``sample`` inside ``rl_step``."""

    def run(*a, **kw):
        t = time.perf_counter()
        try:
            return fn(*a, **kw)
        finally:
            into[name] += time.perf_counter() - t

    return run
