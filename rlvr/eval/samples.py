"""``samples.jsonl``: load with validation, write atomically, group by problem.

One JSON object per line, one line per completion. Only ``problem_id`` and one of
``correct`` / ``reward`` are required, so samples from other tools can be
evaluated; every other known field is type-checked when present (a ``null``
counts as absent for the optional numeric fields). A row is correct when
``correct`` is true, or, when only ``reward`` is present, when reward > 0. ``answer`` is the
model's own parsed answer (null: nothing parsed); ``gold`` the reference answer, which no
statistic reads.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TextIO

import orjson

from rlvr.errors import UserError
from rlvr.log import ReadProgress
from rlvr.paths import HUGE_FLOAT, atomic_write, parse_json_line

# field -> (allowed python types, may be null, human description)
_FIELDS: dict[str, tuple[tuple[type, ...], bool, str]] = {
    "problem_id": ((str,), False, "a string"),
    "completion": ((str,), False, "a string"),
    "answer": ((str,), True, "a string or null"),
    "gold": ((str,), True, "a string or null"),
    "reward": ((int, float), True, "a number"),
    "correct": ((bool,), False, "true or false"),
    "num_tokens": ((int,), False, "a non-negative integer"),
    "mean_logp": ((int, float), True, "a number"),
    "finish_reason": ((str,), False, "a string"),
    "mean_entropy": ((int, float), True, "a number"),
    "split": ((str,), False, "a string"),
    "task": ((str,), False, "a string"),
    "turns": ((int,), False, "a non-negative integer"),  # a tool task's episode (rlvr.rollout.episodes)
    "tool_calls": ((int,), False, "a non-negative integer"),
    "failed_calls": ((int,), False, "a non-negative integer"),
    "env_tokens": ((int,), False, "a non-negative integer"),
    "env_spans": ((list,), False, "a list of [start, end] character spans of the completion"),
}
_NUMERIC = {"reward", "mean_logp", "mean_entropy"}
_COUNTS = {"num_tokens", "turns", "tool_calls", "failed_calls", "env_tokens"}


def _field_error(row: Mapping[str, Any], key: str) -> str | None:
    """The problem with ``row[key]`` as a sentence, or None when it is fine."""
    types, nullable, desc = _FIELDS[key]
    value = row[key]
    if value is None:
        return None if nullable else f"field '{key}' is null; it must be {desc}"
    # bool is a subclass of int: only 'correct' may be a bool
    wrong = isinstance(value, bool) and bool not in types
    if wrong or not isinstance(value, types):
        return f"field '{key}' must be {desc}, got {type(value).__name__} {value!r:.40}"
    if key in _NUMERIC and not math.isfinite(value):
        return f"field '{key}' must be a finite number, got {value!r}"
    if key in _COUNTS and value < 0:
        return f"field '{key}' must be a non-negative integer, got {value}"
    if key == "env_spans" and not all(_is_span(span) for span in value):
        return f"field '{key}' must be {desc} (0 <= start <= end), got {value!r:.60}"
    return None


_NONE = type(None)
_QUICK = {key: frozenset(({int, float} if float in types else set(types)) | ({_NONE} if nullable else set()))
          for key, (types, nullable, _) in _FIELDS.items()}
"""field -> the exact types of a valid value in a row json.loads made (so a bool is never a number)."""
_INF = float("inf")


def _plainly_valid(row: dict) -> bool:
    """True for a row that :func:`row_problem` surely accepts, by exact types (the common case, checked
    fast); False means only that the full check must decide."""
    if "problem_id" not in row or (row.get("correct") is None and row.get("reward") is None):
        return False
    for key, value in row.items():
        types = _QUICK.get(key)
        if types is None:
            continue
        kind = type(value)
        if kind not in types or (kind is float and not -_INF < value < _INF):  # NaN fails both comparisons
            return False
        if kind is int and key in _COUNTS and value < 0:
            return False
        if kind is list and not all(_is_span(span) for span in value):  # env_spans
            return False
    return True


RowShape = tuple
"""A row's keys then its values' types, in the row's order: ``(*row, *map(type, row.values()))``."""
_SHAPES: dict[RowShape, tuple[tuple[str, ...], tuple[str, ...]] | None] = {}
"""shape -> None (a row of it may be invalid or nests lists or objects: the full checks decide) or the
keys of its floats and of its counts (:func:`_shape_checks`); at most :data:`_MAX_SHAPES` kept."""
_MAX_SHAPES = 1024


def _shape_checks(shape: RowShape) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """What is left to check of a row of ``shape`` parsed by orjson: None when its types alone may make
    it invalid or it holds a list or an object; else the keys of its floats (each must lie within
    +-:data:`rlvr.paths.HUGE_FLOAT`, which also makes it finite) and of its integer counts (each >= 0).
    A row passing them is valid (:func:`row_problem`) and is the value ``json.loads`` gives."""
    half = len(shape) // 2
    types = dict(zip(shape[:half], shape[half:], strict=True))
    if any(kind is dict or kind is list for kind in types.values()) or "problem_id" not in types:
        return None
    if types.get("correct", _NONE) is _NONE and types.get("reward", _NONE) is _NONE:
        return None
    if any(kind not in _QUICK.get(key, (kind,)) for key, kind in types.items()):
        return None
    return (tuple(key for key, kind in types.items() if kind is float),
            tuple(key for key, kind in types.items() if kind is int and key in _COUNTS))


def _plain_row(line: str) -> dict | None:
    """The row of ``line`` when orjson parses it into a flat valid samples row whose floats are all
    ``json.loads``'s (checked by the row's shape: :func:`_shape_checks`), else None: then
    :func:`rlvr.paths.parse_json_line` and :func:`row_problem` decide (the common case in a few
    lookups, where those take a walk of the row each)."""
    try:
        row = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if type(row) is not dict:
        return None
    shape = (*row, *map(type, row.values()))
    checks = _SHAPES.get(shape, False)
    if checks is False:
        checks = _shape_checks(shape)
        if len(_SHAPES) < _MAX_SHAPES:
            _SHAPES[shape] = checks
    if checks is None:
        return None
    floats, counts = checks
    for key in floats:
        if not -HUGE_FLOAT < row[key] < HUGE_FLOAT:
            return None
    for key in counts:
        if row[key] < 0:
            return None
    return row


def row_problem(row: Any) -> str | None:
    """What is wrong with a samples row, as a sentence ending in the fix; None when it is valid."""
    if type(row) is dict and _plainly_valid(row):
        return None
    if not isinstance(row, dict):
        return f"expected a JSON object, got {type(row).__name__}; write one object per line"
    if "problem_id" not in row:
        return "missing field 'problem_id'; every sample needs the id of its problem"
    if row.get("correct") is None and row.get("reward") is None:
        return "missing field 'correct' (or 'reward'); say whether the sample is correct"
    for key in _FIELDS:
        if key in row:
            problem = _field_error(row, key)
            if problem:
                return f"{problem}; fix that line"
    return None


def _is_span(span: Any) -> bool:
    """Whether ``span`` is [start, end] with integers 0 <= start <= end."""
    return (isinstance(span, list) and len(span) == 2 and all(type(x) is int for x in span)
            and 0 <= span[0] <= span[1])


def validate_row(row: Any, where: str) -> None:
    """Raise UserError naming ``where`` (e.g. 'samples.jsonl line 3') and the bad field."""
    problem = row_problem(row)
    if problem:
        raise UserError(f"{where}: {problem}")


def is_correct(row: Mapping[str, Any]) -> bool:
    """``correct`` when present (not null), else ``reward > 0``."""
    if row.get("correct") is not None:
        return bool(row["correct"])
    return float(row["reward"]) > 0


class SampleLineError(UserError):
    """A bad line of a samples file: ``{path} line {lineno}: {problem}``."""

    def __init__(self, path: Path, lineno: int, problem: str) -> None:
        super().__init__(f"{path} line {lineno}: {problem}")
        self.path, self.lineno, self.problem = path, lineno, problem


class LinesRead:
    """How many lines (blank ones too) and rows a :func:`read_rows` got through, set when it ends."""

    __slots__ = ("lines", "rows")

    def __init__(self) -> None:
        self.lines = self.rows = 0


def iter_samples(path: str | os.PathLike[str], quiet: bool = True) -> Iterator[dict[str, Any]]:
    """The validated rows of a samples JSONL file, one at a time (blank lines skipped; memory: one
    line); progress on stderr unless ``quiet`` (:class:`rlvr.log.ReadProgress`). An empty file is an error."""
    p = existing_samples_file(path)
    progress = ReadProgress(p.name, p.stat().st_size, quiet)
    counted = LinesRead()
    with p.open(encoding="utf-8") as f:
        yield from read_rows(f, p, progress, counted)
    progress.close()
    if not counted.rows:
        raise empty_file_error(p)


def existing_samples_file(path: str | os.PathLike[str]) -> Path:
    """``path`` as a Path; a UserError when there is no such file."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"samples file {p} does not exist; pass the path of a samples.jsonl")
    return p


def empty_file_error(p: Path) -> UserError:
    """The error for a samples file without a row (blank lines only, or nothing)."""
    return UserError(f"samples file {p} is empty; generate samples first (rlvr eval CHECKPOINT --out DIR)")


def read_rows(f: TextIO, p: Path, progress: ReadProgress, counted: LinesRead) -> Iterator[dict[str, Any]]:
    """The validated rows of the lines of ``f`` (a text file of ``p``, maybe a byte range of it: line
    numbers count from its start); a bad line raises :class:`SampleLineError`. ``progress`` is told
    the bytes read every 4096 lines; ``counted`` holds the lines and rows when the lines end."""
    rows = lineno = 0
    for lineno, line in enumerate(f, start=1):
        if not lineno & 4095:
            progress.done(f.buffer.tell())  # bytes read so far (the text layer reads ahead in chunks)
        if line.isspace():  # a blank line (stops at the first other character: no copy of the line)
            continue
        row = _plain_row(line)
        if row is None:  # not plainly valid: parsed again, as json.loads would, and checked in full
            try:
                row = parse_json_line(line)
            except json.JSONDecodeError as e:
                raise SampleLineError(p, lineno, f"invalid JSON ({e.msg} at column {e.colno}); fix that line") from None
            problem = row_problem(row)
            if problem:
                raise SampleLineError(p, lineno, problem)
        rows += 1
        yield row
    counted.lines, counted.rows = lineno, rows


def load_samples(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Read and validate a samples JSONL file (:func:`iter_samples`) into a list of rows."""
    return list(iter_samples(path))


def write_samples(path: str | os.PathLike[str], rows: Iterable[Mapping[str, Any]]) -> Path:
    """Validate and write rows as JSONL atomically (:func:`rlvr.paths.atomic_write`)."""
    lines = []
    for i, row in enumerate(rows):
        validate_row(row, f"sample {i}")
        lines.append(json.dumps(row, ensure_ascii=False, allow_nan=False))
    return atomic_write(path, "\n".join(lines) + ("\n" if lines else ""))


def group_by_problem(rows: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """problem_id -> its rows, problems in order of first appearance, rows in file order."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        groups.setdefault(row["problem_id"], []).append(row)
    return groups


def normalise_whitespace(text: str) -> str:
    """Strip and collapse every run of whitespace to one space (for answer and trace identity)."""
    return " ".join(text.split())
