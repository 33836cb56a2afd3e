"""Apply wapo_v2's declared pilot rule (docs/reproductions/wapo_v2, its protocol) to the pilots' runs:
each pilot's sampled-token entropy start (the mean of steps 1-``--start-steps``), its collapse step c
(the first step whose trailing ``--window``-step mean is at most ``--fraction`` of the start; none if
never), and the pick: the first pilot (in the order given) with c <= ``--latest`` sets the lr and
L = the smallest of ``--lengths`` with L >= c + ``--after``; if none collapses, the first pilot's lr
and the longest length.

    python benchmarks/studies/entropy_collapse_pick.py OUT/models/pilot_grpo/run=6e-5 \
        OUT/models/pilot_grpo_2x/run=1.2e-4 [--json picks.json]

Each argument is RUN_DIR=LR (a run folder holding metrics.jsonl). Reads only the training batches'
``entropy`` series: no held-out problem.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rlvr.log import read_metrics


def collapse_step(entropy: dict[int, float], start_steps: int, window: int,
                  fraction: float) -> tuple[float, int | None]:
    """step -> entropy: (start, the first step c >= window whose trailing ``window``-step mean (steps
    c-window+1..c, all present) is <= fraction x start, or None)."""
    first = [entropy[s] for s in sorted(entropy) if s <= start_steps]
    if len(first) < start_steps:
        raise ValueError(f"the entropy series has {len(first)} of the first {start_steps} steps")
    start = sum(first) / len(first)
    for c in sorted(entropy):
        trail = [entropy.get(s) for s in range(c - window + 1, c + 1)]
        if c >= window and None not in trail and sum(trail) / window <= fraction * start:
            return start, c
    return start, None


def pick(collapses: list[int | None], lengths: list[int], latest: int, after: int) -> tuple[int, int]:
    """(index of the pilot whose lr is used, L) by the rule."""
    for index, c in enumerate(collapses):
        if c is not None and c <= latest:
            return index, min(length for length in lengths if length >= c + after)
    return 0, max(lengths)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pilots", nargs="+", help="RUN_DIR=LR, in the rule's order")
    parser.add_argument("--start-steps", type=int, default=10)
    parser.add_argument("--window", type=int, default=20)
    parser.add_argument("--fraction", type=float, default=0.5)
    parser.add_argument("--latest", type=int, default=550)
    parser.add_argument("--after", type=int, default=50)
    parser.add_argument("--lengths", default="200,300,400,500,600")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    lengths = [int(x) for x in args.lengths.split(",")]
    rows = []
    for spec in args.pilots:
        run, _, lr = spec.rpartition("=")
        if not run:
            sys.exit(f"{spec!r}: expected RUN_DIR=LR")
        entropy = {int(r["step"]): float(r["entropy"]) for r in read_metrics(run) if "entropy" in r}
        if not entropy:
            sys.exit(f"{run}: no entropy series in metrics.jsonl")
        try:
            start, c = collapse_step(entropy, args.start_steps, args.window, args.fraction)
        except ValueError as error:
            sys.exit(f"{run}: {error}")
        rows.append({"run": run, "lr": lr, "steps": max(entropy), "start": start, "collapse_step": c})
        print(f"{run} (lr {lr}, {max(entropy)} steps): start {start:.4f}, collapse step {c if c else 'none'}")
    index, length = pick([row["collapse_step"] for row in rows], lengths, args.latest, args.after)
    print(f"pick: optim.lr={rows[index]['lr']} train.steps={length}")
    if args.json:
        args.json.write_text(json.dumps({"pilots": rows, "lr": rows[index]["lr"], "steps": length}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
