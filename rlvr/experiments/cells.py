"""One evaluation cell's folder: ``stats.json`` (the finished result) and ``key`` (what decided it);
and the per-problem pass@k of a sampling cell's statistics."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

from rlvr.eval.passk import pass_at_k_matrix


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


def cell_passk(stats: dict, ks) -> np.ndarray:
    """(P, K) unbiased pass@k per problem of a sampling cell (``n`` samples, ``correct`` counts)."""
    return pass_at_k_matrix([stats["n"]] * len(stats["correct"]), stats["correct"], list(ks))
