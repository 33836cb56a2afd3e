"""Where rlvr keeps files, and the two ways it writes them so that a crash leaves no torn file.

- :func:`cache_root`: ``$RLVR_CACHE``, else ``$XDG_CACHE_HOME/rlvr``, else ``~/.cache/rlvr``
  (pretrained tiny bases, tiny HF models built for tests).
- :func:`atomic_write`: a file written to a temporary sibling, fsynced, then renamed over the target.
- :func:`replace_dir`: a directory built in a temporary sibling renamed over the target.
- :func:`read_jsonl` / :func:`iter_jsonl`: the objects of a JSON-lines file, a bad line a one-line
  UserError naming it.
- :func:`is_run_dir` / :func:`require_run_dir` / :func:`metrics_file`: what makes a folder a run
  directory (its ``config.yaml``) and where its metrics are, each checked in one place.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

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


def atomic_write(path: str | os.PathLike[str], data: str | bytes, encoding: str = "utf-8") -> Path:
    """Write ``data`` to ``path`` atomically: a reader sees the old file or the new one, never half.

    The temporary file lives in the same folder (a rename across file systems is not atomic) and is
    removed if the write fails.
    """
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
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
    return Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))


def replace_dir(tmp: Path, final: Path) -> Path:
    """Rename the finished directory ``tmp`` over ``final`` (an old ``final`` is removed first)."""
    fsync_tree(tmp)
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    return final


def iter_jsonl(path: str | Path, text: str | None = None) -> Iterator[tuple[int, dict]]:
    """(line number, object) of each non-blank line of ``path`` (or of ``text``, named ``path`` in
    errors); a line that is not a JSON object raises UserError naming ``path:line``."""
    lines = (Path(path).read_text(encoding="utf-8") if text is None else text).splitlines()
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
