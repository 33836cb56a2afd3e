"""The verdict of a tool task's declared protocol (calculator: docs/results_tools.md; code_synth_tool:
docs/results_code_synth_tool.md), computed from the runs' own files: per seed the held-out episode
success at the first logged step and after the last step, the gain, the run's wall clock; over the
seeds the mean gain with a 95% Student-t interval (:func:`rlvr.experiments.verdict.seed_interval`
over per-seed values with no interval of their own: mean +- t(0.975, n-1) s / sqrt(n)); pass iff
mean >= 0.10 and the interval's lower end > 0.

    python benchmarks/studies/calculator_gain.py runs/calc2-s0 runs/calc2-s1 runs/calc2-s2
    python benchmarks/studies/calculator_gain.py runs/cst2-s0 runs/cst2-s1 runs/cst2-s2
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import yaml

from rlvr.experiments.verdict import Estimate, seed_interval
from rlvr.log import read_metrics

BAR = 0.10
"""The issue's bar: the mean held-out episode-success gain must reach this."""


def seed_row(run: Path) -> dict:
    """Held-out success at the first and last logged evaluation of ``run``, the gain, the wall clock."""
    rows = [r for r in read_metrics(run) if "heldout_pass_rate" in r]
    seed = yaml.safe_load((run / "config.yaml").read_text())["train"]["seed"]
    summary = json.loads((run / "train_summary.json").read_text())
    command_wall = run / "command_wall_s"  # written by the runner: the whole `rlvr train` command, evaluations included
    wall = float(command_wall.read_text()) if command_wall.exists() else None
    first, last = rows[0], rows[-1]
    calls = {f"{key}_{end}": row.get(key) for end, row in (("first", first), ("last", last))
             for key in ("tool_calls", "failed_call_share", "pass_rate_with_call")}
    return {"run": str(run), "seed": seed, "first_step": first["step"], "before": first["heldout_pass_rate"],
            "last_step": last["step"], "after": last["heldout_pass_rate"],
            "gain": last["heldout_pass_rate"] - first["heldout_pass_rate"], "steps_wall_s": summary["wall_s"],
            "wall_s": wall, **calls}


def verdict(rows: list[dict]) -> dict:
    """Mean gain, its 95% Student-t interval over the seeds, and pass/fail against :data:`BAR`."""
    pooled = seed_interval([Estimate(r["seed"], r["gain"], r["gain"], r["gain"]) for r in rows])
    passed = pooled.value >= BAR and pooled.lo > 0
    return {"seeds": len(rows), "mean_gain": pooled.value, "lo": pooled.lo, "hi": pooled.hi,
            "max_wall_s": max((r["wall_s"] or r["steps_wall_s"]) for r in rows), "pass": bool(passed)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", type=Path, help="run folders of the RL seeds")
    args = p.parse_args()
    rows = [seed_row(r) for r in args.runs]
    print("| seed | held-out success (step) | after (step) | gain | wall: command (steps only) |")
    print("| --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['seed']} | {r['before']:.3f} ({r['first_step']}) | {r['after']:.3f} ({r['last_step']}) "
              f"| {r['gain']:+.3f} | {r['wall_s'] or float('nan'):.0f} s ({r['steps_wall_s']:.0f} s) |")
    print("\n| seed | tool calls per episode | failed calls | training success with a call |")
    print("| --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['seed']} | {r['tool_calls_first']:.2f} -> {r['tool_calls_last']:.2f} "
              f"| {r['failed_call_share_first']:.3f} -> {r['failed_call_share_last']:.3f} "
              f"| {r['pass_rate_with_call_first']:.3f} -> {r['pass_rate_with_call_last']:.3f} |")
    print(json.dumps(verdict(rows), indent=1))


if __name__ == "__main__":
    main()
