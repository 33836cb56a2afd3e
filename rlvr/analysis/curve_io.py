"""Read one compute-performance curve (compute C, held-out pass rate R) from disk.

Accepted inputs:
- an rlvr run directory (or its ``metrics.jsonl``): C from ``flops`` | ``samples`` |
  ``wall_s`` | ``gpu_hours`` (falls back to ``wall_s / 3600``), R = ``heldout_pass_rate``
  on the lines that have it;
- a CSV or JSONL file from any framework with columns ``compute`` and ``pass_rate``;
- a W&B run-history CSV or TensorBoard events of TRL / verl (or any run, with ``y_key``), through
  :mod:`rlvr.analysis.history_io`; neither logs FLOPs, so ``flops`` falls back to ``tokens``.

Every problem raises :class:`rlvr.errors.UserError` naming the file and the fix.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np

from rlvr.analysis.history_io import is_history, load_history
from rlvr.errors import UserError
from rlvr.metric_names import flat, flat_key
from rlvr.paths import metrics_file, read_jsonl

X_KEYS = ("flops", "samples", "tokens", "gpu_hours", "wall")
_METRIC_KEY = {"flops": "flops", "samples": "samples", "tokens": "tokens", "wall": "wall_s", "gpu_hours": "gpu_hours"}
_Y_KEY = "heldout_pass_rate"


def _number(value, path: Path, row: int, column: str) -> float:
    """A finite float, else a UserError naming the file, row and column."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        msg = f"{path}: row {row}: {column}={value!r} is not a number; write plain numbers"
        raise UserError(msg) from None
    if isinstance(value, bool) or not math.isfinite(v):
        raise UserError(f"{path}: row {row}: {column}={value!r} is not a finite number; remove that row")
    return v


def _metrics_xy(rows: list[dict], path: Path, x: str) -> list[tuple[object, object, int]]:
    """(compute, pass rate, row number) from rlvr metrics lines with a held-out evaluation."""
    evals = [(i, r) for i, r in enumerate(rows, start=1) if r.get(_Y_KEY) is not None]
    if not evals:
        raise UserError(
            f"{path}: no line has '{_Y_KEY}'; enable held-out evaluation during training, "
            "or pass a CSV/JSONL file with columns compute,pass_rate"
        )
    out = []
    for i, r in evals:
        if x == "gpu_hours" and "gpu_hours" not in r and "wall_s" in r:
            c = _number(r["wall_s"], path, i, "wall_s") / 3600.0
        elif _METRIC_KEY[x] in r:
            c = r[_METRIC_KEY[x]]
        else:
            raise UserError(f"{path}: line {i} has no '{_METRIC_KEY[x]}' key; choose another --x ({X_KEYS})")
        out.append((c, r[_Y_KEY], i))
    return out


def _table_xy(rows: list[dict], path: Path, columns: list[str]) -> list[tuple[object, object, int]]:
    """(compute, pass rate, row number) from a generic table with compute,pass_rate columns."""
    missing = [c for c in ("compute", "pass_rate") if c not in columns]
    if missing:
        raise UserError(
            f"{path}: missing column(s) {', '.join(missing)} (found: {', '.join(columns) or 'none'}); "
            "write a header line 'compute,pass_rate'"
        )
    return [(r.get("compute"), r.get("pass_rate"), i) for i, r in enumerate(rows, start=1)]


def _validate(raw: list[tuple[object, object, int]], path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(N,) compute and pass rate arrays; compute >= 0 strictly increasing, pass rate in [0, 1]."""
    if not raw:
        raise UserError(f"{path}: no data rows; the file needs at least one compute,pass_rate row")
    C = np.array([_number(c, path, i, "compute") for c, _, i in raw])
    R = np.array([_number(r, path, i, "pass_rate") for _, r, i in raw])
    rows = [i for _, _, i in raw]
    if (C < 0).any():
        k = int(np.argmax(C < 0))
        raise UserError(f"{path}: row {rows[k]}: compute {C[k]:g} is negative; compute must be >= 0")
    if ((R < 0) | (R > 1)).any():
        k = int(np.argmax((R < 0) | (R > 1)))
        raise UserError(f"{path}: row {rows[k]}: pass rate {R[k]:g} is outside [0, 1]; give fractions, not %")
    bad = np.nonzero(np.diff(C) <= 0)[0]
    if bad.size:
        k = int(bad[0]) + 1
        raise UserError(
            f"{path}: row {rows[k]}: compute {C[k]:g} does not increase (previous {C[k - 1]:g}); "
            "sort the rows by compute and drop duplicates"
        )
    return C, R


def load_run_curve(path: str | Path, x: str = "flops", framework: str = "auto",
                   y_key: str | None = None) -> tuple[str, np.ndarray, np.ndarray]:
    """Read (name, C, R) with C, R: (N,) arrays, C strictly increasing.

    ``path``: an rlvr run directory, its metrics.jsonl, or a CSV/JSONL file with columns
    compute,pass_rate. ``x`` selects the compute axis of run directories ("flops" |
    "samples" | "tokens" | "gpu_hours" | "wall" = seconds); generic files carry their own units.
    A W&B history CSV or TensorBoard log is read through :mod:`rlvr.analysis.history_io`
    (``framework`` auto | trl | verl | rlvr; ``y_key``: the held-out pass-rate key), where ``flops``
    falls back to ``tokens`` when no FLOPs were logged.
    The name is the run directory's name or the file's stem."""
    try:
        return _load_curve(Path(path), x, framework, y_key)
    except UnicodeDecodeError as e:
        raise UserError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start}); pass a run directory or a "
                        "compute,pass_rate CSV/JSONL file") from None


def _load_curve(p: Path, x: str, framework: str, y_key: str | None):
    if x not in X_KEYS:
        raise UserError(f"unknown compute axis {x!r}; choose one of {', '.join(X_KEYS)}")
    if not p.exists():
        raise UserError(f"{p}: no such file or directory; pass a run directory or a compute,pass_rate file")
    if is_history(p):
        rows = load_history(p, framework, y_key)
        if x == "flops" and not any("flops" in r for r in rows):
            x = "tokens"  # peers log no FLOPs; tokens are proportional to them for one model
        return (p.resolve().name if p.is_dir() else p.stem), *_validate(_metrics_xy(rows, p, x), p)
    if p.is_dir():
        metrics = metrics_file(p)
        rows = [flat(r) for r in read_jsonl(metrics)]  # old flat and namespaced names both read
        return p.resolve().name, *_validate(_metrics_xy(rows, metrics, x), metrics)
    suffix = p.suffix.lower()
    if suffix == ".csv":
        with p.open(newline="") as fh:
            reader = csv.DictReader(fh)
            rows = list(reader)
            columns = [c.strip() for c in (reader.fieldnames or [])]
        rows = [{(k or "").strip(): v for k, v in r.items()} for r in rows]
        return p.stem, *_validate(_table_xy(rows, p, columns), p)
    if suffix in (".jsonl", ".json"):
        rows = read_jsonl(p)
        if rows and "compute" not in rows[0] and _Y_KEY in {flat_key(k) for r in rows for k in r}:
            rows = [flat(r) for r in rows]
            name = p.resolve().parent.name if p.name == "metrics.jsonl" else p.stem
            return name, *_validate(_metrics_xy(rows, p, x), p)
        columns = sorted({k for r in rows for k in r})
        return p.stem, *_validate(_table_xy(rows, p, columns), p)
    raise UserError(f"{p}: unsupported file type {suffix or '(none)'}; use a run directory, .csv or .jsonl")
