"""Per-epoch means of a training run's metrics: the test-set accuracy of a test-time (TTRL) run.

In test-time mode every training batch is a sample of the test set, so the mean of `gt_accuracy`
over one epoch (every problem seen once, group_size samples each) is the accuracy on the test set
under the policy of that epoch, from 8x more completions than one held-out evaluation. An epoch is
task.heldout_size / algo.prompts_per_step steps, read from the run's config.yaml
(`--steps-per-epoch` overrides it, e.g. for a run that is not test-time). The means are
:func:`rlvr.analysis.metric_series.epoch_means`.

    python benchmarks/studies/epoch_means.py RUN_DIR [--keys gt_accuracy,label_accuracy,reward] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from rlvr.analysis.metric_series import epoch_means
from rlvr.config import load_config
from rlvr.log import read_metrics


def steps_per_epoch(run: Path) -> int:
    """task.heldout_size / algo.prompts_per_step of a test-time run (config.yaml)."""
    cfg = load_config(str(run / "config.yaml"))
    if not cfg.task.test_time:
        raise SystemExit(f"error: {run} is not a test-time run (task.test_time is false); "
                         "pass --steps-per-epoch N")
    return max(1, math.ceil(cfg.task.heldout_size / cfg.algo.prompts_per_step))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path, help="run directory (holds metrics.jsonl and config.yaml)")
    ap.add_argument("--keys", default="gt_accuracy,label_accuracy,reward", help="comma-separated metric names")
    ap.add_argument("--steps-per-epoch", type=int, default=0, help="default: from the run's config")
    ap.add_argument("--json", action="store_true", help="print JSON lines instead of a table")
    args = ap.parse_args()
    metrics = args.run / "metrics.jsonl"
    if not metrics.is_file():
        sys.exit(f"error: {metrics} does not exist; pass a run directory written by `rlvr train`")
    lines = read_metrics(args.run)
    per_epoch = args.steps_per_epoch or steps_per_epoch(args.run)
    keys = [k for k in args.keys.split(",") if k]
    rows = epoch_means(lines, per_epoch, keys)
    if args.json:
        for r in rows:
            print(json.dumps(r))
        return
    print(f"{'epoch':>5} {'steps':>9} " + " ".join(f"{k:>15}" for k in keys))
    for r in rows:
        cells = " ".join(f"{'n/a' if r[k] is None else format(r[k], '.3f'):>15}" for k in keys)
        print(f"{r['epoch']:>5} {r['steps']:>9} {cells}")


if __name__ == "__main__":
    main()
