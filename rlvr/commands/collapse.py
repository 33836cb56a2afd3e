"""``rlvr collapse``: model-collapse step of intrinsic-reward runs, and their ranking."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from rlvr.console import print_table
from rlvr.errors import UserError
from rlvr.paths import atomic_write, metrics_file

HELP = "Find the model-collapse step of intrinsic-reward runs and rank them (later = stronger prior)."
EPILOG = """examples:
  rlvr collapse runs/sc_qwen0.5b runs/sc_qwen1.5b
  rlvr collapse runs/*/ --window 5 --threshold 0.01 --json collapse.json
  rlvr collapse curves/model_a.jsonl curves/model_b.jsonl   # rows {"step", "reward_accuracy", "accuracy"}

A run has collapsed at the first step where the trailing mean of reward accuracy
over --window points is below --threshold (docs/methods/unsupervised_rlvr.md)."""

NUMERIC_KEYS = ("reward_accuracy", "heldout_pass_rate", "accuracy", "gt_accuracy", "reward")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="+", metavar="RUN_DIR_OR_FILE",
                        help="rlvr run directories (metrics.jsonl) or JSONL files, one per run")
    parser.add_argument("--window", type=int, default=3, help="moving-average window in points (default 3)")
    parser.add_argument("--threshold", type=float, default=0.01,
                        help="collapse when smoothed reward accuracy is below this (default 0.01)")
    parser.add_argument("--margin", type=float, default=0.05,
                        help="accuracy rise and fall needed to call a curve rise-then-fall (default 0.05)")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON to FILE")


def _metrics_file(path: Path) -> Path:
    if not path.exists():
        raise UserError(f"{path} does not exist; pass an rlvr run directory or a JSONL file of rows")
    return metrics_file(path) if path.is_dir() else path


def _check_row(row: dict, where: str) -> dict:
    step = row.get("step")
    if not isinstance(step, int) or isinstance(step, bool):
        raise UserError(f"{where} has step={step!r}; every row needs an integer 'step'")
    for key in NUMERIC_KEYS:
        v = row.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int | float)):
            raise UserError(f"{where} has non-numeric {key}={v!r}; write a number or null")
    return row


def load_rows(path: Path) -> list[dict]:
    """The rows of one run (a run dir's metrics.jsonl or a plain JSONL file), validated; old flat
    and namespaced metric names both read (:func:`rlvr.metric_names.flat`)."""
    from rlvr.metric_names import flat
    from rlvr.paths import iter_jsonl

    f = _metrics_file(path)
    rows = [_check_row(flat(row), f"{f}:{i}") for i, row in iter_jsonl(f)]
    if not rows:
        raise UserError(f"{f} is empty; it needs one row per training step")
    if not any(isinstance(r.get("reward_accuracy"), int | float) and math.isfinite(r["reward_accuracy"])
               for r in rows):
        raise UserError(f"{f} has no reward_accuracy column; use a run trained with an intrinsic reward")
    return rows


def _names(paths: list[Path]) -> list[str]:
    names = [p.stem if p.is_file() else p.resolve().name for p in paths]
    names = [str(p) if names.count(n) > 1 else n for n, p in zip(names, paths)]
    if len(set(names)) < len(names):
        raise UserError("the same run is given twice; pass each run once")
    return names


def _fmt(v: float | None, digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


TABLE_HEADERS = ["run", "collapse", "peak acc (step)", "final acc (step)", "proxy@collapse", "rise&fall"]


def _table_rows(names: list[str], results: dict) -> list[list[str]]:
    rows = []
    for n in names:
        r = results[n]
        peak_step = r.peak_step if r.peak_step is not None else "-"
        rows.append([n, str(r.collapse_step) if r.collapsed else "none", f"{_fmt(r.peak_accuracy)} ({peak_step})",
                     f"{_fmt(r.final_accuracy)} ({r.final_step})", _fmt(r.proxy_at_collapse),
                     "yes" if r.rise_then_fall else "no"])
    return rows


def _ranking(order: list[str], results: dict) -> list[str]:
    lines = ["ranking (later collapse = stronger prior = more to gain from supervised RLVR):"]
    for i, n in enumerate(order, start=1):
        r = results[n]
        what = f"collapses at step {r.collapse_step}" if r.collapsed else \
            f"no collapse within {r.final_step} steps"
        lines.append(f"  {i}. {n}: {what}")
    return lines


def run(args: argparse.Namespace) -> int:
    from rlvr.analysis.collapse import analyse_run, rank_runs
    from rlvr.commands._common import check_output

    paths = [Path(p) for p in args.runs]
    for p in paths:  # every input exists before anything else is checked or read
        _metrics_file(p)
    if args.json:
        check_output(args.json, "--json")
    if args.window < 1:
        raise UserError(f"--window {args.window} is below 1; pass a positive number of points")
    if not math.isfinite(args.threshold) or not math.isfinite(args.margin):
        raise UserError("--threshold and --margin must be finite numbers; pass e.g. --threshold 0.01")
    names = _names(paths)
    results = {n: analyse_run(load_rows(p), args.window, args.threshold, args.margin)
               for n, p in zip(names, paths)}
    order = rank_runs(results)
    print_table(TABLE_HEADERS, _table_rows(names, results), align="lrrrrl")
    print("\n".join(["", *_ranking(order, results)]))
    if args.json:
        rank = {n: i for i, n in enumerate(order, start=1)}
        out = {"runs": [{"name": n, "path": str(p), "rank": rank[n], **results[n].to_dict()}
                        for n, p in zip(names, paths)],
               "ranking": order, "window": args.window, "threshold": args.threshold}
        atomic_write(args.json, json.dumps(out, indent=2) + "\n")
    return 0
