"""Samples written by other frameworks, turned into rlvr's samples rows (:mod:`rlvr.eval.samples`).

Formats (``fmt``):

- ``rlvr``: rlvr's own ``samples.jsonl``.
- ``trl``: TRL's completions table. ``GRPOTrainer(log_completions=True)`` writes
  ``<output_dir>/completions/completions_<step:05d>.parquet`` (and logs the same table to W&B as
  ``completions``) with columns ``step``, ``prompt``, ``completion``, one column per reward function
  (its ``__name__``; NaN where it did not apply), any ``log_extra`` columns, and ``advantage``
  (trl/trainer/grpo_trainer.py, ``GRPOTrainer.log``, read 2026-07). Read from .parquet, from a W&B
  table file (``{"columns": [...], "data": [[...], ...]}``), or from JSON / JSONL / CSV records.
- ``verl``: verl's rollout / validation dumps (``trainer.rollout_data_dir`` /
  ``trainer.validation_data_dir``): ``<dir>/<global_step>.jsonl``, one object per sample with
  ``input``, ``output``, ``gts`` (ground truth), ``score`` (summed token-level score), ``step``, plus
  the reward function's extra keys such as ``acc`` (verl/trainer/ppo/ray_trainer.py,
  ``RayPPOTrainer._dump_generations``, read 2026-01).
- ``table``: any JSONL / JSON / CSV / parquet table with a column mapping
  (``prompt=question,completion=response,correct=is_right``).

Correctness, in this order: a mapped ``correct`` column (verl: ``acc`` when present); the named
task's verifier (``task``), against the file's answer column (verl: ``gts``) or, failing that, the
task's problem whose prompt is the row's prompt; else ``reward > 0`` (rlvr's rule) on the one
reward column. Samples are grouped into problems by ``problem_id`` when mapped, else by prompt text.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
from pathlib import Path
from typing import Any

from rlvr.errors import UserError
from rlvr.eval.samples import load_samples, validate_row
from rlvr.paths import read_jsonl
from rlvr.rewards.verify import verify_all
from rlvr.types import Problem, prompt_key

FORMATS = ("auto", "rlvr", "trl", "verl", "table")
FIELDS = ("problem_id", "prompt", "completion", "answer", "correct", "reward")
TRL_FIXED = ("step", "prompt", "completion", "advantage", "image")
VERL_MAP = {"prompt": "input", "completion": "output", "answer": "gts", "reward": "score"}


# ----------------------------------------------------------------------------- reading tables
def read_table(path: str | Path) -> list[dict[str, Any]]:
    """Rows (dicts) of a .jsonl, .json (records, or a W&B table with columns/data), .csv or .parquet."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"{p}: no such file; pass a samples file")
    suffix = p.suffix.lower()
    if suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise UserError(f"{p}: reading parquet needs pyarrow (pip install 'rlvr[import]')") from None
        return pq.read_table(p).to_pylist()
    if suffix == ".csv":
        with p.open(newline="", encoding="utf-8") as fh:
            return [dict(r) for r in csv.DictReader(fh)]
    text = p.read_text(encoding="utf-8")
    if suffix == ".json":
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as e:
            raise UserError(f"{p}: invalid JSON ({e.msg} at line {e.lineno}); fix the file") from None
        if isinstance(obj, dict) and isinstance(obj.get("columns"), list) and isinstance(obj.get("data"), list):
            return [dict(zip(obj["columns"], row)) for row in obj["data"]]  # a W&B table file
        if isinstance(obj, list) and all(isinstance(r, dict) for r in obj):
            return obj
        raise UserError(f"{p}: expected a list of records or a W&B table ({{'columns', 'data'}})")
    return read_jsonl(p, text)


def detect(rows: list[dict], path: str | Path = "") -> str:
    """The format of ``rows`` judged by their columns: rlvr | trl | verl; else a UserError asking for
    --format table --columns."""
    cols = set(rows[0]) if rows else set()
    if "problem_id" in cols and ({"correct", "reward"} & cols):
        return "rlvr"
    if {"prompt", "completion", "advantage"} <= cols:
        return "trl"
    if {"input", "output", "score"} <= cols:
        return "verl"
    raise UserError(f"{path}: cannot tell the format from the columns {sorted(cols)}; pass --format table and "
                    "--columns prompt=COL,completion=COL,correct=COL (or reward=COL, or --task NAME)")


def parse_columns(text: str | None) -> dict[str, str]:
    """``"prompt=question,completion=response"`` -> {"prompt": "question", ...}; keys from FIELDS."""
    out: dict[str, str] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        key, sep, col = part.partition("=")
        key, col = key.strip(), col.strip()
        if not sep or not col:
            raise UserError(f"--columns: {part!r} is not FIELD=COLUMN; e.g. --columns prompt=question,correct=ok")
        if key not in FIELDS:
            raise UserError(f"--columns: unknown field {key!r}; use {', '.join(FIELDS)}")
        out[key] = col
    return out


# ----------------------------------------------------------------------------- mapping
def column_map(rows: list[dict], fmt: str, columns: dict[str, str], task: Any, path: str | Path = "") -> dict:
    """field -> column for ``fmt``, the explicit ``columns`` overriding the format's own."""
    cols = list(rows[0]) if rows else []
    if fmt == "verl":
        base = dict(VERL_MAP, **({"correct": "acc"} if "acc" in cols else {}))
    elif fmt == "trl":
        base = {"prompt": "prompt", "completion": "completion"}
        rewards = [c for c in cols if c not in TRL_FIXED]
        if "reward" not in columns and "correct" not in columns:
            if len(rewards) == 1:
                base["reward"] = rewards[0]
            elif task is None:
                raise UserError(f"{path}: the TRL table has reward columns {rewards}; say which decides correctness "
                                f"(--columns reward={rewards[0] if rewards else 'NAME'}) or pass --task NAME")
    else:
        base = {}
    m = {**base, **columns}
    missing = [c for c in m.values() if c not in cols]
    if missing:
        raise UserError(f"{path}: no column(s) {missing} (the file has {cols}); fix --columns")
    if "completion" not in m or ("correct" not in m and "reward" not in m and task is None):
        raise UserError(f"{path}: map a completion column and one of correct / reward, or pass --task NAME "
                        "(e.g. --columns prompt=question,completion=response,correct=is_right)")
    if "prompt" not in m and "problem_id" not in m:
        raise UserError(f"{path}: map a prompt or problem_id column (samples are grouped by problem)")
    return m


def _problem_id(prompt: str) -> str:
    return "p" + hashlib.sha1(prompt.encode("utf-8")).hexdigest()[:12]


def _bool(v: Any, where: str) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, int | float) and not (isinstance(v, float) and math.isnan(v)):
        return v > 0
    if isinstance(v, str) and v.strip().lower() in ("true", "false", "1", "0", "yes", "no"):
        return v.strip().lower() in ("true", "1", "yes")
    raise UserError(f"{where}: correct={v!r} is not true/false; map another column")


def _float(v: Any, where: str, col: str) -> float | None:
    if v is None or v == "":
        return None
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise UserError(f"{where}: {col}={v!r} is not a number; map another column") from None
    return None if math.isnan(x) else x


def to_samples(rows: list[dict], m: dict[str, str], source: str, path: str | Path = "") -> list[dict]:
    """rlvr samples rows (problem_id, completion, prompt?, answer?, correct?, reward?, source)."""
    out = []
    for i, r in enumerate(rows, start=1):
        where = f"{path} row {i}"
        prompt = r.get(m["prompt"]) if "prompt" in m else None
        if isinstance(prompt, list):  # chat messages
            prompt = json.dumps(prompt, ensure_ascii=False, sort_keys=True)
        s: dict[str, Any] = {
            "problem_id": str(r[m["problem_id"]]) if "problem_id" in m else _problem_id(str(prompt)),
            "completion": "" if r.get(m["completion"]) is None else str(r[m["completion"]]),
            "source": source,
        }
        if prompt is not None:
            s["prompt"] = str(prompt)
        if "answer" in m and r.get(m["answer"]) is not None:
            s["answer"] = str(r[m["answer"]])
        if "reward" in m:
            reward = _float(r.get(m["reward"]), where, m["reward"])
            if reward is not None:
                s["reward"] = reward
        if "correct" in m and r.get(m["correct"]) not in (None, ""):
            s["correct"] = _bool(r[m["correct"]], where)
        out.append(s)
    return out


def verify_with_task(samples: list[dict], task: Any, path: str | Path = "") -> list[dict]:
    """Set ``correct`` from ``task``'s verifier on the rows without it: against the task's problem
    with the same prompt (every split the task has; the problem carries what its verifier needs,
    e.g. the tests of a code task), else against the row's answer; neither -> UserError."""
    todo = [s for s in samples if "correct" not in s]
    if not todo:
        return samples
    by_prompt: dict[str, Problem] = {}
    for split in ("train", "heldout"):
        try:
            split_problems = task.problems(split)
        except UserError:  # a test-set task (humaneval) has no train split
            continue
        for p in split_problems:
            by_prompt.setdefault(prompt_key(p.prompt), p)
    problems = []
    for s in todo:
        if "prompt" in s and prompt_key(s["prompt"]) in by_prompt:  # text, or chat messages
            problems.append(by_prompt[prompt_key(s["prompt"])])
        elif "answer" in s:
            problems.append(Problem(s["problem_id"], s.get("prompt", ""), s["answer"]))
        else:
            raise UserError(f"{path}: a prompt ({s.get('prompt', '')[:60]!r}) is not a problem of task "
                            f"{getattr(task, 'name', task)!r} and the file has no answer column; map answer=COL")
    for s, p, v in zip(todo, problems, verify_all(task, [s["completion"] for s in todo], problems)):
        s["correct"] = v.status == "right"
        s.setdefault("answer", p.answer)
    return samples


def load_any(path: str | Path, fmt: str = "auto", columns: str | None = None, task: Any = None) -> list[dict]:
    """Samples rows from a file in any supported format (module docstring), ready for pass@k; a file
    that is not text (nor parquet) is a UserError naming it."""
    try:
        return _load_any(path, fmt, columns, task)
    except UnicodeDecodeError as e:
        raise UserError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start}); give a samples file: JSONL, "
                        "CSV or parquet") from None


def _load_any(path: str | Path, fmt: str, columns: str | None, task: Any) -> list[dict]:
    if fmt not in FORMATS:
        raise UserError(f"unknown --format {fmt!r}; use {' | '.join(FORMATS)}")
    cols = parse_columns(columns)
    if fmt == "rlvr" or (fmt == "auto" and Path(path).suffix.lower() == ".jsonl" and not cols and _is_rlvr(path)):
        return load_samples(path)
    rows = read_table(path)
    if not rows:
        raise UserError(f"{path}: no rows")
    if fmt == "auto":
        fmt = "table" if cols and not _known(rows) else detect(rows, path)
    if fmt == "rlvr":
        return load_samples(path)
    m = column_map(rows, fmt, cols, task, path)
    samples = to_samples(rows, m, fmt, path)
    if task is not None:
        samples = verify_with_task(samples, task, path)
    for i, s in enumerate(samples, start=1):
        if "correct" not in s and "reward" not in s:
            raise UserError(f"{path} row {i}: no correctness (empty reward); map correct=COL or pass --task NAME")
        validate_row(s, f"{path} row {i}")
    return samples


def _known(rows: list[dict]) -> bool:
    try:
        detect(rows)
        return True
    except UserError:
        return False


def _is_rlvr(path: str | Path) -> bool:
    with Path(path).open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    return True  # let the rlvr loader report the bad line
                return isinstance(row, dict) and "problem_id" in row
    return True
