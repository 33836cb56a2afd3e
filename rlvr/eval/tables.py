"""Tables of samples as the peers write them, read as dicts: whole (:func:`read_table`) or one row at a
time (:func:`iter_table`, memory bounded by a row or a parquet batch, progress on long reads).

Suffixes: ``.parquet``; ``.csv``; ``.json`` (a list of records, or a W&B table file
``{"columns": [...], "data": [[...], ...]}``: one JSON document, parsed whole); anything else JSONL.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rlvr.errors import UserError
from rlvr.log import ReadProgress
from rlvr.paths import parse_json_line

PARQUET_BATCH = 4096  # rows per parquet batch read


def read_table(path: str | Path) -> list[dict[str, Any]]:
    """Rows (dicts) of a .jsonl, .json (records, or a W&B table with columns/data), .csv or .parquet."""
    return list(iter_table(path))


def iter_table(path: str | Path, quiet: bool = True) -> Iterator[dict[str, Any]]:
    """The rows of a table file one at a time (module docstring); progress on stderr unless ``quiet``."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"{p}: no such file; pass a samples file")
    suffix = p.suffix.lower()
    if suffix == ".parquet":
        yield from _parquet_rows(p, quiet)
    elif suffix == ".csv":
        yield from _csv_rows(p, quiet)
    elif suffix == ".json":
        yield from _json_rows(p)
    else:
        yield from _jsonl_rows(p, quiet)


def _parquet_rows(p: Path, quiet: bool) -> Iterator[dict[str, Any]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise UserError(f"{p}: reading parquet needs pyarrow (pip install 'rlvr[import]')") from None
    table = pq.ParquetFile(p)
    progress = ReadProgress(p.name, table.metadata.num_rows, quiet, unit="rows", min_total=200_000)
    done = 0
    for batch in table.iter_batches(batch_size=PARQUET_BATCH):
        yield from batch.to_pylist()
        done += batch.num_rows
        progress.done(done)
    progress.close()


def _csv_rows(p: Path, quiet: bool) -> Iterator[dict[str, Any]]:
    progress = ReadProgress(p.name, p.stat().st_size, quiet)
    with p.open("rb") as raw, io.TextIOWrapper(raw, encoding="utf-8", newline="") as text:
        for i, row in enumerate(csv.DictReader(text), start=1):
            if not i & 4095:
                progress.done(raw.tell())
            yield dict(row)
    progress.close()


def _json_rows(p: Path) -> Iterator[dict[str, Any]]:
    try:
        obj = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise UserError(f"{p}: invalid JSON ({e.msg} at line {e.lineno}); fix the file") from None
    if isinstance(obj, dict) and isinstance(obj.get("columns"), list) and isinstance(obj.get("data"), list):
        columns = obj["columns"]
        yield from (dict(zip(columns, row)) for row in obj["data"])  # a W&B table file
    elif isinstance(obj, list) and all(isinstance(r, dict) for r in obj):
        yield from obj
    else:
        raise UserError(f"{p}: expected a list of records or a W&B table ({{'columns', 'data'}})")


def _jsonl_rows(p: Path, quiet: bool) -> Iterator[dict[str, Any]]:
    """The JSON objects of the file's lines (blank lines skipped); one that is not an object, or not
    JSON, raises UserError naming ``path:line`` (:func:`rlvr.paths.iter_jsonl`'s messages)."""
    progress = ReadProgress(p.name, p.stat().st_size, quiet)
    with p.open(encoding="utf-8") as f:
        for i, line in enumerate(f, start=1):
            if not i & 4095:
                progress.done(f.buffer.tell())
            if line.isspace():
                continue
            try:
                row = parse_json_line(line)
            except json.JSONDecodeError as e:
                raise UserError(f"{p}:{i} is not valid JSON ({e.msg}); fix or delete that line") from None
            if not isinstance(row, dict):
                raise UserError(f"{p}:{i} is not a JSON object; write one object per line")
            yield row
    progress.close()
