"""Where rlvr keeps files, and the two ways it writes them so that a crash leaves no torn file.

- :func:`cache_root`: ``$RLVR_CACHE``, else ``$XDG_CACHE_HOME/rlvr``, else ``~/.cache/rlvr``
  (pretrained tiny bases, tiny HF models built for tests).
- :func:`atomic_write`: a file written to a temporary sibling, fsynced, then renamed over the target.
- :func:`replace_dir`: a directory built in a temporary sibling renamed over the target.
- :func:`read_jsonl` / :func:`iter_jsonl`: the objects of a JSON-lines file, a bad line a one-line
  UserError naming it.
- :func:`parse_json_line`: ``json.loads`` of one line, parsed by orjson (about 3x faster) where that
  gives the same value (for the line-by-line readers of samples files and peers' dumps).
- :func:`is_run_dir` / :func:`require_run_dir` / :func:`metrics_file`: what makes a folder a run
  directory (its ``config.yaml``) and where its metrics are, each checked in one place.
- :func:`claim_new_dir`: a folder a new run may write into (missing or empty; ``overwrite`` empties it
  and says what it removed).

Files and folders are created with the modes the umask allows (``0o666 & ~umask``,
``0o777 & ~umask``), as ``open`` and ``mkdir`` create them, so collaborators can read a run.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from rlvr.errors import UserError


def cache_root() -> Path:
    """The cache folder (not created here)."""
    base = os.environ.get("RLVR_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "rlvr")
    return Path(base)


RUN_CONFIG = "config.yaml"
"""The resolved config a run directory holds; its presence is what makes a folder a run directory."""
RUN_METRICS = "metrics.jsonl"
"""The per-step metrics of a run directory (one JSON line per step)."""


def is_run_dir(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a run directory (``rlvr train`` wrote its ``config.yaml`` there)."""
    return (Path(path) / RUN_CONFIG).is_file()


def require_run_dir(path: str | os.PathLike[str], what: str = "") -> Path:
    """``path/config.yaml`` of the run directory ``path``; a UserError ``[<what> ]<path>: not a run
    directory (no config.yaml)`` otherwise."""
    if not is_run_dir(path):
        raise UserError(f"{what + ' ' if what else ''}{path}: not a run directory (no {RUN_CONFIG}); pass the "
                        "folder `rlvr train` created")
    return Path(path) / RUN_CONFIG


def metrics_file(run_dir: str | os.PathLike[str]) -> Path:
    """``run_dir/metrics.jsonl``; a UserError naming the folder when it has none."""
    path = Path(run_dir) / RUN_METRICS
    if not path.is_file():
        raise UserError(f"{run_dir}: no {RUN_METRICS}; pass a run directory written by the trainer")
    return path


def _umask() -> int:
    """The process umask: from ``/proc/self/status`` where there is one (no race with threads creating
    files), else by setting it and setting it back (there is no getter)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def file_mode() -> int:
    """The mode ``open(path, "w")`` gives a new file: ``0o666`` less the umask."""
    return 0o666 & ~_umask()


def dir_mode() -> int:
    """The mode ``mkdir`` gives a new folder: ``0o777`` less the umask."""
    return 0o777 & ~_umask()


def claim_new_dir(path: str | os.PathLike[str], overwrite: bool = False, flag: str = "--run-dir") -> Path:
    """``path`` as the folder of a new run: missing or empty is fine (it is created); a non-empty
    folder is a UserError naming what it holds, unless ``overwrite``, which removes its contents and
    prints one line saying what was removed. A file at ``path`` is always an error. The temporary
    files of an atomic write a kill interrupted (``.NAME.*.tmp``) do not count: a run killed while
    it started still starts again."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise UserError(f"{flag} {p} is a file, not a folder; give a folder path")
    held = sorted(x.name for x in p.iterdir() if not _is_temp(x)) if p.is_dir() else []
    if held:
        what = describe_dir(p, held)
        if not overwrite:
            fix = ("continue it with --resume, " if is_run_dir(p) else "") + \
                "give another folder, or pass --overwrite to delete its contents"
            raise UserError(f"{flag} {p} is not empty ({what}); {fix}")
        print(f"--overwrite: removing {what} from {p}", file=sys.stderr, flush=True)
        for name in held:
            x = p / name
            shutil.rmtree(x) if x.is_dir() and not x.is_symlink() else x.unlink()
    p.mkdir(parents=True, exist_ok=True)
    return p


def _is_temp(entry: Path) -> bool:
    """A leftover temporary file of :func:`atomic_write` (``.NAME.XXXX.tmp``)."""
    return entry.is_file() and entry.name.startswith(".") and entry.name.endswith(".tmp")


def describe_dir(p: Path, held: list[str]) -> str:
    """``a run: config.yaml, metrics.jsonl (12 steps), 3 checkpoints`` or ``4 entries: a, b, c, ...``."""
    if not is_run_dir(p):
        shown = ", ".join(held[:4]) + (", ..." if len(held) > 4 else "")
        return f"{len(held)} entr{'y' if len(held) == 1 else 'ies'}: {shown}"
    parts = [RUN_CONFIG]
    if (p / RUN_METRICS).is_file():
        with open(p / RUN_METRICS, "rb") as f:
            lines = sum(1 for line in f if line.strip())
        parts.append(f"{RUN_METRICS} ({lines} lines)")
    ckpts = [c for c in (p / "checkpoints").glob("step_*")] if (p / "checkpoints").is_dir() else []
    if ckpts:
        parts.append(f"{len(ckpts)} checkpoint{'s' if len(ckpts) != 1 else ''}")
    rest = [n for n in held if n not in (RUN_CONFIG, RUN_METRICS, "checkpoints")]
    if rest:
        parts.append(f"{len(rest)} other entr{'y' if len(rest) == 1 else 'ies'}")
    return "a run: " + ", ".join(parts)


def atomic_write(path: str | os.PathLike[str], data: str | bytes, encoding: str = "utf-8") -> Path:
    """Write ``data`` to ``path`` atomically: a reader sees the old file or the new one, never half.

    The temporary file lives in the same folder (a rename across file systems is not atomic) and is
    removed if the write fails.
    """
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, file_mode())  # mkstemp makes 0600 whatever the umask
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode(encoding) if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return p


def fsync_tree(d: Path) -> None:
    """fsync every file directly under ``d`` and ``d`` itself."""
    for f in d.iterdir():
        if f.is_file():
            with open(f, "rb") as fh:
                os.fsync(fh.fileno())
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def temp_dir_beside(final: Path) -> Path:
    """A new empty directory next to ``final`` (same file system), to build it in."""
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    tmp.chmod(dir_mode())  # mkdtemp makes 0700 whatever the umask
    return tmp


def replace_dir(tmp: Path, final: Path) -> Path:
    """Rename the finished directory ``tmp`` over ``final`` (an old ``final`` is removed first)."""
    fsync_tree(tmp)
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    return final


def read_text(path: str | os.PathLike[str]) -> str:
    """The UTF-8 text of ``path``; a UserError naming it when it is not text (a binary file)."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise UserError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start}); give a text file "
                        "(JSON lines, CSV)") from None


def iter_jsonl(path: str | Path, text: str | None = None) -> Iterator[tuple[int, dict]]:
    """(line number, object) of each non-blank line of ``path`` (or of ``text``, named ``path`` in
    errors); a line that is not a JSON object raises UserError naming ``path:line``."""
    lines = (read_text(path) if text is None else text).splitlines()
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise UserError(f"{path}:{i} is not valid JSON ({e.msg}); fix or delete that line") from None
        if not isinstance(row, dict):
            raise UserError(f"{path}:{i} is not a JSON object; write one object per line")
        yield i, row


def read_jsonl(path: str | Path, text: str | None = None) -> list[dict]:
    """The JSON objects of the lines of ``path`` (or of ``text``): :func:`iter_jsonl` without line numbers."""
    return [row for _, row in iter_jsonl(path, text)]


HUGE_FLOAT = 9.2e18
"""A float parsed by orjson at or beyond this magnitude may be a rounded integer literal (beyond 64 bits)."""


def parse_json_line(line: str) -> Any:
    """``json.loads(line)``: the same value, or the same ``json.JSONDecodeError`` (message, line,
    column), parsed by orjson where it can. A line orjson rejects (NaN and Infinity literals, a number
    that overflows a float, lone surrogates, nesting deeper than 1024, anything not JSON) is parsed
    again by ``json.loads``, as is one whose value holds a float of magnitude 9.2e18 or more: orjson
    reads an integer beyond 64 bits as a rounded float, where ``json.loads`` keeps it exact."""
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return json.loads(line)
    return json.loads(line) if _holds_huge_float(value) else value


def _holds_huge_float(value: Any) -> bool:
    """Whether a parsed JSON value holds a float outside (-9.2e18, 9.2e18) at any depth (an integer
    literal beyond 64 bits, which orjson rounds to a float, is one). Scalars are checked in the loop,
    not by a call each: this runs on every row of a samples file."""
    kind = type(value)
    if kind is float:
        return not -HUGE_FLOAT < value < HUGE_FLOAT
    if kind is dict:
        value = value.values()
    elif kind is not list:
        return False
    for item in value:
        kind = type(item)
        if kind is float:
            if not -HUGE_FLOAT < item < HUGE_FLOAT:
                return True
        elif (kind is dict or kind is list) and _holds_huge_float(item):
            return True
    return False
