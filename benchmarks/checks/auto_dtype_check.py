"""Does ``model.dtype=auto`` pick the faster precision? The measurement behind it against the real
RL step, timed in the same process (docs/performance.md, "Precision by machine").

1. ``--measures`` fresh measurements (``rlvr.model.bf16_probe.measure``, never the cache) for the
   embedded default model: bf16 autocast speed over float32, its training pass and its decoding.
2. ``--steps`` real RL steps of ``rlvr run``'s recipe from the cached base in float32, then in
   bfloat16, with the step's own functions timed in place: sampling (``sample``) and forward +
   backward (``micro_step``); medians over the steps after the second.

Prints the real step's bf16 speed (float32 seconds / bf16 seconds, > 1 means bf16 is faster), the
measurements' range, and in how many of them the measurement makes the choice the real step's
speed would make (bfloat16 only at :data:`rlvr.model.precision.MARGIN` or more). Run it on a quiet
machine: other work on the cores distorts both.

    python benchmarks/checks/auto_dtype_check.py [--measures 6] [--steps 20] [--threads 1]
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared _timing.py
from _timing import adding_time  # noqa: E402


def real_steps(dtype: str, steps: int, out: Path) -> dict[str, float]:
    """Median seconds per RL step (whole, sampling, forward + backward) of ``steps`` steps in ``dtype``."""
    import rlvr.train.loop as loop
    import rlvr.train.step as step
    from rlvr.config import load_config

    clock: dict[str, list[float]] = collections.defaultdict(list)
    current: dict[str, float] = collections.defaultdict(float)
    saved = loop.rl_step, step.sample, step.micro_step

    def timed(fn, name):
        return adding_time(fn, name, current)

    def whole(*a, **kw):
        current.clear()
        t = time.perf_counter()
        m = saved[0](*a, **kw)
        clock["step"].append(time.perf_counter() - t)
        for k in ("sampling", "forward+backward"):
            clock[k].append(current[k])
        return m

    loop.rl_step, step.sample, step.micro_step = whole, timed(saved[1], "sampling"), timed(saved[2], "forward+backward")
    try:
        cfg = load_config("quickstart", [f"train.out_dir={out}", f"train.steps={steps}", "train.eval_every=0",
                                         f"model.dtype={dtype}", "train.eval_problems=1",
                                         f"train.checkpoint_every={steps + 1}", "log.progress=none",
                                         "task.retention_tasks=[]"])
        loop.train(cfg, run_dir=out / dtype, progress="none")
    finally:
        loop.rl_step, step.sample, step.micro_step = saved
    return {k: statistics.median(v[2:]) for k, v in clock.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--measures", type=int, default=6)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    if a.steps < 4 or a.measures < 1:
        ap.error("--steps must be at least 4 (the first two are not timed) and --measures at least 1")
    torch.set_num_threads(a.threads)
    from rlvr.config import load_config
    from rlvr.machine import machine_info, machine_line
    from rlvr.model import bf16_probe, precision

    print("machine: " + machine_line(machine_info("float32", torch.device("cpu"))))
    spec = precision.config_spec(load_config("quickstart", []).model)
    ms = [bf16_probe.measure(spec) for _ in range(a.measures)]
    with tempfile.TemporaryDirectory() as tmp:
        f32 = real_steps("float32", a.steps, Path(tmp))
        b16 = real_steps("bfloat16", a.steps, Path(tmp))
    print(f"real RL step ({a.steps - 2} timed steps each, {a.threads} thread(s)):")
    real = {}
    for k in ("sampling", "forward+backward", "step"):
        real[k] = f32[k] / b16[k]
        print(f"  {k:17s} float32 {f32[k]:.3f} s  bf16 {b16[k]:.3f} s  bf16 speed {real[k]:.2f}x")

    def span(key: str) -> str:
        v = [m[key] for m in ms]
        return f"{min(v):.2f}-{max(v):.2f}x"

    print(f"measurement ({a.measures} runs): {span('ratio')} (train {span('train_ratio')}, "
          f"decode {span('decode_ratio')}); margin {precision.MARGIN}x")
    real_bf16 = real["step"] >= precision.MARGIN
    agree = sum((m["ratio"] >= precision.MARGIN) == real_bf16 for m in ms)
    choice = "bfloat16" if real_bf16 else "float32"
    print(f"the measurement makes the choice the real step's speed would make ({choice}) in {agree} of "
          f"{a.measures} runs")
    print(json.dumps({"benchmark": "auto_dtype_check", "real_step_ratio": round(real["step"], 3),
                      "measure_ratios": [round(m["ratio"], 3) for m in ms], "agree": agree}))


if __name__ == "__main__":
    main()
