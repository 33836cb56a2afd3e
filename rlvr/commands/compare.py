"""``rlvr compare``: groups of runs against the first, paired differences with intervals, curves with
seed bands, one self-contained HTML page."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "Compare runs (grouped over seeds): paired differences with intervals, curves with seed bands, HTML."
EPILOG = """examples:
  rlvr compare runs/cispo-s0-* runs/cispo-s1-* runs/grpo-s0-* runs/grpo-s1-*   # groups cispo, grpo; paired by seed
  rlvr compare runs/a runs/b --out a_vs_b.html --json a_vs_b.json
  rlvr compare r1 r2 r3 r4 --group base base new new    # name the groups yourself
  rlvr compare runs/* --smooth mean --window 10          # rolling mean instead of the EMA
the first group is the reference: every difference is group - reference, over the same held-out
problems (samples.jsonl), paired seed by seed where the groups share seeds.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dirs", nargs="+", type=Path, metavar="RUN_DIR",
                        help="run directories (metrics.jsonl, eval.json, samples.jsonl); the first group is the "
                             "reference")
    parser.add_argument("--group", nargs="+", metavar="LABEL",
                        help="one group label per RUN_DIR, in order (default: the folder name without its seed "
                             "and time suffixes)")
    parser.add_argument("--smooth", choices=("ema", "mean", "none"), default="ema",
                        help="curve smoothing: debiased EMA, trailing rolling mean, or none (default: ema)")
    parser.add_argument("--window", type=int, default=5,
                        help="smoothing span (EMA, alpha = 2/(span+1)) or rolling-mean window, in logged points "
                             "(default: 5)")
    parser.add_argument("--ks", help="pass@k ks, comma-separated (default: powers of two up to n)")
    parser.add_argument("--out", type=Path, default=Path("compare.html"), metavar="FILE",
                        help="output HTML (default: ./compare.html)")
    parser.add_argument("--json", type=Path, default=None, metavar="FILE", help="also write the differences as JSON")
    parser.add_argument("--plain", action="store_true", help="plain tables even on a terminal")


def _ks(text: str | None) -> list[int] | None:
    from rlvr.errors import UserError

    if not text:
        return None
    try:
        return sorted({int(k) for k in text.split(",") if k.strip()})
    except ValueError:
        raise UserError(f"--ks must be comma-separated integers like 1,4,16, got {text!r}") from None


def run(args: argparse.Namespace) -> int:
    import json

    from rlvr.analysis.smoothing import Smoothing
    from rlvr.commands._common import require_path
    from rlvr.console import print_table
    from rlvr.paths import atomic_write
    from rlvr.report.compare_page import render_compare
    from rlvr.report.differences import paired_differences
    from rlvr.report.run_data import load_runs, runs_by_group

    for d in args.run_dirs:
        require_path(d, "run directory", "pass folders written by `rlvr train` or `rlvr run`", kind="dir")
    smoothing = Smoothing(args.smooth, args.window)
    groups = runs_by_group(load_runs(list(args.run_dirs), args.group))
    labels = list(groups)
    ks = _ks(args.ks)
    differences = {label: paired_differences(groups[labels[0]], groups[label], ks) for label in labels[1:]}
    for label, diff in differences.items():
        rows = [[r["metric"], _cell(r["reference"]), _cell(r["other"]), _cell(r["difference"], "+.3f"),
                 "–" if not r["ci"] else f"[{r['ci'][0]:+.3f}, {r['ci'][1]:+.3f}]"] for r in diff["rows"]]
        print_table(["metric", labels[0], label, "difference", "95% CI"], rows, align="lrrrr", plain=args.plain,
                    title=f"{label} vs {labels[0]} (paired {diff['pairing']})")
    if len(labels) == 1:
        print(f"one group ({labels[0]}): nothing to pair; pass runs of two recipes or use --group")
    out = atomic_write(args.out, render_compare(groups, differences, smoothing))
    if args.json:
        atomic_write(args.json, json.dumps({"reference": labels[0], "groups": {g: [r.name for r in rs]
                                                                              for g, rs in groups.items()},
                                            "differences": differences}, indent=1))
    print(f"page: {out}")
    return 0


def _cell(value, spec: str = ".3f") -> str:
    return "–" if value is None else format(value, spec)
