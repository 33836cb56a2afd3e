"""Per-problem counts ``(problem, n, correct)``: how published results come (a study's table of correct
samples out of n per problem), read as samples rows for pass@k, support, crossover and their intervals.

A CSV / JSONL / JSON / parquet table with one row per problem: ``problem`` (or ``problem_id``), ``n``
(samples drawn) and ``correct`` (how many were right); ``--columns problem_id=COL,n=COL,correct=COL``
names other columns. Each problem becomes n rows (``correct`` of them right) with no completion and no
answer, so the answer statistics (maj@k, parsable, answer entropy) are n/a.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from rlvr.errors import UserError

COUNT_FIELDS = ("problem_id", "n", "correct")
DEFAULT_COLUMNS = {"problem_id": ("problem", "problem_id"), "n": ("n",), "correct": ("correct",)}


def _count(value: Any, where: str, column: str) -> int:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise UserError(f"{where}: {column}={value!r:.40} is not a count; map another column") from None
    if not math.isfinite(number) or number != int(number) or number < 0:
        raise UserError(f"{where}: {column}={value!r:.40} is not a whole count >= 0; fix that row")
    return int(number)


def count_columns(rows: list[dict], columns: dict[str, str], path: str | Path = "") -> dict[str, str]:
    """field -> column for the counts fields: the mapping given, else the default names."""
    cols = list(rows[0]) if rows else []
    unknown = sorted(set(columns) - set(COUNT_FIELDS))
    if unknown:
        raise UserError(f"--columns: {unknown} are not counts fields; use {', '.join(COUNT_FIELDS)}")
    mapping = dict(columns)
    for field, names in DEFAULT_COLUMNS.items():
        if field not in mapping:
            found = next((c for c in names if c in cols), None)
            if found is None:
                raise UserError(f"{path}: a counts table needs columns problem, n, correct (the file has {cols}); "
                                "map them: --columns problem_id=COL,n=COL,correct=COL")
            mapping[field] = found
    missing = [c for c in mapping.values() if c not in cols]
    if missing:
        raise UserError(f"{path}: no column(s) {missing} (the file has {cols}); fix --columns")
    return mapping


def counts_to_samples(rows: list[dict], columns: dict[str, str], path: str | Path = "") -> list[dict]:
    """Samples rows (problem_id, correct, source="counts"): each problem's n samples, ``correct`` of them
    right (the right ones first; pass@k and support depend only on the counts)."""
    return list(iter_count_samples(rows, columns, path))


def iter_count_samples(rows: Iterable[dict], columns: dict[str, str], path: str | Path = "") -> Iterator[dict]:
    """:func:`counts_to_samples` one problem's rows at a time (the columns judged by the first row)."""
    mapping: dict[str, str] | None = None
    seen: set[str] = set()
    for i, row in enumerate(rows, start=1):
        if mapping is None:
            mapping = count_columns([row], columns, path)
        where = f"{path} row {i}"
        problem = str(row[mapping["problem_id"]])
        n = _count(row[mapping["n"]], where, mapping["n"])
        correct = _count(row[mapping["correct"]], where, mapping["correct"])
        if n < 1 or correct > n:
            raise UserError(f"{where}: need 1 <= n and correct <= n, got n={n}, correct={correct}; fix that row")
        if problem in seen:
            raise UserError(f"{where}: problem {problem!r} appears twice; give one row per problem")
        seen.add(problem)
        yield from ({"problem_id": problem, "correct": j < correct, "source": "counts"} for j in range(n))
    if mapping is None:
        count_columns([], columns, path)  # no rows: the missing-columns error
