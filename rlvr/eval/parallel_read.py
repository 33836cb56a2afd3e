"""One rlvr samples file tallied over byte ranges in parallel, with the serial read's result.

The file is cut into ``workers`` byte ranges, each boundary moved just past a newline (so every line
lies whole in one range and the ranges read as the serial read's lines, universal newlines included);
forked processes tally ranges 2.. (:func:`rlvr.eval.tally.tally_rows` of
:func:`rlvr.eval.samples.read_rows`) while this process tallies the first, and the tallies are merged
in file order (:func:`rlvr.eval.tally.merge_tallies`: problems in order of first appearance, exact
sums, first correct sample), so every statistic equals the serial read's, bit for bit. A bad line
raises the serial read's error with the serial line number (the lines of the ranges before it
added); the first bad line in file order wins, as it would serially. A range that is not UTF-8 is
read again serially, which raises the serial read's error. Forked processes share this process's
string hashes, which the trace sets hold. Memory: each process holds its own tallies and one line.
"""

from __future__ import annotations

import io
import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from rlvr.eval.samples import (
    LinesRead,
    SampleLineError,
    empty_file_error,
    existing_samples_file,
    iter_samples,
    read_rows,
)
from rlvr.eval.tally import Tallies, merge_tallies, tally_rows
from rlvr.log import ReadProgress

PARALLEL_MIN_BYTES = 256 << 20
"""Files smaller than this are read serially by default (starting processes costs more than it saves)."""
MAX_DEFAULT_WORKERS = 4


def can_fork() -> bool:
    """Whether reading processes are forked here: on Linux (fork is missing on Windows and unsafe on macOS)."""
    return sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods()


def default_workers(path: str | os.PathLike[str]) -> int:
    """Processes to read ``path`` with by default: the cores this process may run on (at most
    :data:`MAX_DEFAULT_WORKERS`) for a file of :data:`PARALLEL_MIN_BYTES` or more, else 1; 1 where
    processes are not forked (:func:`can_fork`)."""
    if not can_fork() or Path(path).stat().st_size < PARALLEL_MIN_BYTES:
        return 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(cores, MAX_DEFAULT_WORKERS))


def byte_ranges(path: str | os.PathLike[str], parts: int) -> list[tuple[int, int]]:
    """[start, end) byte ranges covering the file, at most ``parts``, each but the last ending just
    after a newline (empty ranges dropped)."""
    size = Path(path).stat().st_size
    starts = [0]
    with open(path, "rb") as f:
        for i in range(1, parts):
            f.seek(max(size * i // parts, starts[-1]))
            f.readline()  # to just past the next newline
            starts.append(min(f.tell(), size))
    ends = starts[1:] + [size]
    return [(start, end) for start, end in zip(starts, ends, strict=True) if end > start]


class _ByteRange(io.RawIOBase):
    """The bytes ``[start, end)`` of an open binary file, as a readable raw stream."""

    def __init__(self, raw: io.BufferedReader, start: int, end: int) -> None:
        super().__init__()
        raw.seek(start)
        self.raw, self.left, self.read_so_far = raw, end - start, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        size = min(len(buffer), self.left)
        if size <= 0:
            return 0
        got = self.raw.readinto(memoryview(buffer)[:size])
        self.left -= got
        self.read_so_far += got
        return got

    def tell(self) -> int:
        return self.read_so_far


RangeResult = tuple[str, Tallies | None, int, int, str]
"""(outcome: ok | bad-line | not-utf8, tallies, lines, rows or the bad line's number in the range, problem)."""


def tally_range(path: Path, start: int, end: int, progress: ReadProgress | None = None) -> RangeResult:
    """The tallies of the rows in ``[start, end)`` of ``path`` and its line and row counts, or where its
    first bad line is (line number within the range) and what is wrong with it."""
    counted = LinesRead()
    with open(path, "rb") as raw:
        text = io.TextIOWrapper(io.BufferedReader(_ByteRange(raw, start, end)), encoding="utf-8")
        try:
            tallies = tally_rows(read_rows(text, path, progress or ReadProgress("", 0, True), counted))
        except SampleLineError as e:
            return "bad-line", None, 0, e.lineno, e.problem
        except UnicodeDecodeError:
            return "not-utf8", None, 0, 0, ""
    return "ok", tallies, counted.lines, counted.rows, ""


def tally_samples_file(path: str | os.PathLike[str], workers: int, quiet: bool = True) -> Tallies:
    """The tallies :func:`rlvr.eval.tally.tally_rows` of :func:`rlvr.eval.samples.iter_samples` give,
    read by ``workers`` processes (this one and ``workers - 1`` forked ones; module docstring; one
    where :func:`can_fork` is False)."""
    p = existing_samples_file(path)
    ranges = byte_ranges(p, workers) if workers > 1 and can_fork() else []
    if len(ranges) < 2:
        return tally_rows(iter_samples(p, quiet))
    progress = ReadProgress(p.name, ranges[0][1], quiet)  # this process's range: the first
    with ProcessPoolExecutor(len(ranges) - 1, mp_context=multiprocessing.get_context("fork")) as pool:
        others = [pool.submit(tally_range, p, start, end) for start, end in ranges[1:]]
        results = [tally_range(p, *ranges[0], progress)] + [future.result() for future in others]
    progress.close()
    lines_before = 0
    for outcome, _, lines, rows_or_line, problem in results:
        if outcome == "bad-line":
            raise SampleLineError(p, lines_before + rows_or_line, problem)
        if outcome == "not-utf8":
            return tally_rows(iter_samples(p, quiet))  # raises the serial read's error
        lines_before += lines
    if not sum(rows for _, _, _, rows, _ in results):
        raise empty_file_error(p)
    return merge_tallies(tallies for _, tallies, _, _, _ in results)
