"""One evaluation cell's folder: ``stats.json`` (the finished result), ``key`` (what decided it) and
``computed_at`` (when it was computed: the provenance of the claims that read it); and the per-problem
pass@k of a sampling cell's statistics."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from rlvr.eval.passk import pass_at_k_matrix
from rlvr.paths import atomic_write

UNKNOWN_TIME = "unknown"
"""``computed_at`` of a cell restored from a record that did not carry its time."""


def open_cell(out: Path, key: str) -> dict | None:
    """The cell's finished statistics when ``out`` holds them under ``key``; else None, with ``out``
    ready to be filled: a folder holding another key's results is cleared first (never mixed in),
    then created and stamped with ``key`` (partial work under the same key is kept: resume)."""
    done, key_file = out / "stats.json", out / "key"
    if key_file.exists() and key_file.read_text() != key:
        shutil.rmtree(out)
    if done.exists():
        return json.loads(done.read_text())
    out.mkdir(parents=True, exist_ok=True)
    key_file.write_text(key)
    return None


def cell_state(out: Path, key: str | None) -> str:
    """"cached" (``out`` holds finished statistics under ``key``), "stale" (finished under another key:
    computed under an older declaration or code; with ``key`` None, whatever it holds cannot be
    current, e.g. the evaluation of a model not on disk) or "absent" (nothing finished)."""
    if not (out / "stats.json").exists():
        return "absent"
    key_file = out / "key"
    return "cached" if key is not None and key_file.exists() and key_file.read_text() == key else "stale"


def finish_cell(out: Path, stats: dict) -> dict:
    """Write a finished cell: ``out/stats.json``, then ``out/computed_at`` (ISO 8601 UTC) -> stats."""
    atomic_write(out / "stats.json", json.dumps(stats))
    atomic_write(out / "computed_at", datetime.now(UTC).isoformat(timespec="seconds"))
    return stats


def cell_time(out: Path) -> str | None:
    """When the cell in ``out`` was computed (ISO 8601): its ``computed_at``; a cell written before
    cells recorded it: its ``stats.json``'s modification time; a restored cell whose record had no
    time, or no cell: None."""
    stamp = out / "computed_at"
    if stamp.exists():
        text = stamp.read_text().strip()
        return None if text in ("", UNKNOWN_TIME) else text
    done = out / "stats.json"
    if not done.exists():
        return None
    return datetime.fromtimestamp(done.stat().st_mtime, UTC).isoformat(timespec="seconds")


def cell_passk(stats: dict, ks) -> np.ndarray:
    """(P, K) unbiased pass@k per problem of a sampling cell (``n`` samples, ``correct`` counts)."""
    return pass_at_k_matrix([stats["n"]] * len(stats["correct"]), stats["correct"], list(ks))
