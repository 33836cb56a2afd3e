"""The published record of an experiment's cells, so a run split across sessions and machines
survives the loss of its output folder.

``rlvr reproduce NAME --publish`` writes, beside the page in ``docs/reproductions/NAME/cells/``:

- ``models/<model-id>.json``: a finished model's ``done.json`` with its run's ``train_summary.json``
  and ``machine.json`` (what the page's Models section reads; never the weights);
- ``evals/<protocol>/<cell>.json.gz``: an evaluation cell's ``key``, ``stats.json`` and
  ``computed_at`` (when it was computed, None where the cell did not record it; gzip with no
  timestamp, so an unchanged cell is an unchanged file); a dynamics cell keeps only the experiment's
  ``archive.series`` when it declares them (``stats["archived_series"]`` then names them).

``rlvr reproduce NAME --resume-published`` puts every record the output folder lacks back in place
(it never overwrites a local one): the runner then counts those models and cells as done, and a
restored cell keeps the time it was computed ("unknown" where its record has none). A model
restored this way has no checkpoint here; an evaluation it still lacks stops with a message saying so.
A restored model or cell keeps its record's bytes beside it (:data:`RECORD`), and publishing it again
unchanged writes those bytes back: a record is the provenance of its cell (when it was computed, on
which machine), so republishing never rewrites it.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

from rlvr.experiments.cells import UNKNOWN_TIME, cell_time
from rlvr.paths import atomic_write

RUN_RECORDS = ("train_summary.json", "machine.json")  # of models/<id>/run/, kept beside done.json
RECORD = "published_record"
"""The file in a restored model's or cell's folder holding its published record, byte for byte."""


def read_json(path: Path) -> dict | None:
    """The JSON object in ``path``; None when it is absent or unreadable."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _gz(obj: dict) -> bytes:
    return gzip.compress(json.dumps(obj).encode(), mtime=0)


def prune(stats: dict, series: tuple[str, ...]) -> dict:
    """A dynamics cell's stats with only ``series`` kept (all when empty); other cells unchanged."""
    if not series or stats.get("kind") != "dynamics":
        return stats
    return {**stats, "series": {k: v for k, v in stats["series"].items() if k in series},
            "archived_series": list(series)}


def save_archive(out: Path, dest: Path, series: tuple[str, ...] = ()) -> dict[str, int]:
    """Write the records of every finished model and evaluation cell of ``out`` to ``dest``
    (replaced whole) -> {"models": n, "evals": n}."""
    shutil.rmtree(dest, ignore_errors=True)
    counts = {"models": 0, "evals": 0}
    for done in sorted(out.glob("models/*/done.json")):
        info = read_json(done)
        if info is None:
            continue
        rec = {"done": info, **{n: r for n in RUN_RECORDS if (r := read_json(done.parent / "run" / n)) is not None}}
        (dest / "models").mkdir(parents=True, exist_ok=True)
        raw, published = _published(done.parent)
        unchanged = published == {**rec, "done": _unrestored(info)}
        atomic_write(dest / "models" / f"{done.parent.name}.json", raw if unchanged else json.dumps(rec, indent=1))
        counts["models"] += 1
    for stats_file in sorted(out.glob("evals/*/*/stats.json")):
        stats, key_file = read_json(stats_file), stats_file.parent / "key"
        if stats is None or not key_file.exists():
            continue
        cell = dest / "evals" / stats_file.parent.parent.name / f"{stats_file.parent.name}.json.gz"
        cell.parent.mkdir(parents=True, exist_ok=True)
        key, kept = key_file.read_text(), prune(stats, series)
        raw, published = _published(stats_file.parent)
        unchanged = published.get("key") == key and published.get("stats") == kept
        atomic_write(cell, raw if unchanged else _gz({"key": key, "stats": kept,
                                                      "computed_at": cell_time(stats_file.parent)}))
        counts["evals"] += 1
    return counts


def _unrestored(info: dict) -> dict:
    """A model's ``done.json`` without the mark :func:`restore_archive` adds."""
    return {k: v for k, v in info.items() if k != "restored"}


def _published(folder: Path) -> tuple[bytes, dict]:
    """(bytes, content) of the published record ``folder`` was restored from (:data:`RECORD`); (b"", {})
    when it was not restored. The caller writes those bytes back when the folder still holds what
    the record says (not computed again since)."""
    try:
        raw = (folder / RECORD).read_bytes()
        return raw, json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    except (OSError, ValueError):
        return b"", {}


def restore_archive(src: Path, out: Path) -> dict[str, int]:
    """Put every record of ``src`` that ``out`` lacks into ``out`` -> {"models": n, "evals": n}
    restored (a local model or cell, finished or not, is left as it is)."""
    counts = {"models": 0, "evals": 0}
    for rec_file in sorted(src.glob("models/*.json")):
        d = out / "models" / rec_file.stem
        rec = read_json(rec_file)
        if rec is None or d.exists():
            continue
        for n in RUN_RECORDS:
            if n in rec:
                atomic_write(d / "run" / n, json.dumps(rec[n], indent=1))
        atomic_write(d / RECORD, rec_file.read_bytes())
        atomic_write(d / "done.json", json.dumps({**rec["done"], "restored": str(rec_file)}, indent=1))
        counts["models"] += 1
    for cell in sorted(src.glob("evals/*/*.json.gz")):
        d = out / "evals" / cell.parent.name / cell.name.removesuffix(".json.gz")
        if d.exists():
            continue
        raw = cell.read_bytes()
        rec = json.loads(gzip.decompress(raw))
        atomic_write(d / "key", rec["key"])  # the key first: a cell with a key and no stats is unfinished
        atomic_write(d / RECORD, raw)
        atomic_write(d / "stats.json", json.dumps(rec["stats"]))
        atomic_write(d / "computed_at", rec.get("computed_at") or UNKNOWN_TIME)
        counts["evals"] += 1
    return counts
