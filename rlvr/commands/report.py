"""``rlvr report``: the self-contained HTML report of one run, or several runs overlaid."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "Write a self-contained HTML report (curves, pass@k, support, scaling fit, config) of run(s)."
EPILOG = """examples:
  rlvr report runs/quickstart-20250101-120000          # -> that run's report.html
  rlvr report runs/cispo runs/dapo --out compare.html  # overlay two runs on the same axes
  rlvr report runs/* --out all.html                     # every run, legend = run directory name
the file needs no network to view: images are embedded, no external CSS/JS/fonts.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dirs", nargs="+", type=Path, metavar="RUN_DIR",
                        help="run directories (with config.yaml, metrics.jsonl and/or eval.json)")
    parser.add_argument("--out", type=Path, default=None, metavar="FILE",
                        help="output HTML (default: RUN_DIR/report.html for one run, ./report.html for several)")


def default_out(run_dirs: list[Path]) -> Path:
    return run_dirs[0] / "report.html" if len(run_dirs) == 1 else Path("report.html")


def run(args: argparse.Namespace) -> int:
    from rlvr.commands._common import check_output, require_path
    from rlvr.report.html import write_report

    for d in args.run_dirs:
        require_path(d, "run directory", "pass a folder written by `rlvr train` or `rlvr run`", kind="dir")
    out = args.out or default_out(list(args.run_dirs))
    check_output(out, "--out" if args.out else "report")
    out = write_report(list(args.run_dirs), out)
    print(out)
    return 0
