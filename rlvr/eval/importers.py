"""Samples written by other frameworks, turned into rlvr's samples rows (:mod:`rlvr.eval.samples`).

Formats (``fmt``):

- ``rlvr``: rlvr's own ``samples.jsonl``.
- ``trl``: TRL's completions table. ``GRPOTrainer(log_completions=True)`` writes
  ``<output_dir>/completions/completions_<step:05d>.parquet`` (and logs the same table to W&B as
  ``completions``) with columns ``step``, ``prompt``, ``completion``, one column per reward function
  (its ``__name__``; NaN where it did not apply), any ``log_extra`` columns, and ``advantage``
  (trl/trainer/grpo_trainer.py, ``GRPOTrainer.log``, TRL 1.16). In the conversational format the
  prompt and completion are message lists (a Python repr of one once W&B or a CSV made it text): the
  completion is the last assistant message's content. Read from .parquet, from a W&B table file
  (``{"columns": [...], "data": [[...], ...]}``), or from JSON / JSONL / CSV records.
- ``verl``: verl's rollout / validation dumps (``trainer.rollout_data_dir`` /
  ``trainer.validation_data_dir``): ``<dir>/<global_step>.jsonl``, one object per sample with
  ``input``, ``output``, ``gts`` (the gold answer), ``score`` (summed token-level score), ``step``,
  ``reward``, plus the reward function's extra keys: ``acc`` (the DAPO scorer's bool; for a scorer
  returning a float, the score itself) and ``pred`` (the DAPO scorer's parsed model answer,
  ``[INVALID]`` when none) (verl/trainer/ppo/ray_trainer.py ``RayPPOTrainer._write_generations`` and
  verl/experimental/reward_loop/reward_manager/naive.py, verl 0.9.1).
- ``prime-rl``, ``skyrl``, ``nemo-rl``: their dump records, :mod:`rlvr.eval.peer_records`.
- ``counts``: per-problem ``(problem, n, correct)``, :mod:`rlvr.eval.counts`.
- ``table``: any JSONL / JSON / CSV / parquet table with a column mapping
  (``prompt=question,completion=response,correct=is_right``).

Fields: ``answer`` is the model's own answer (a model-answer column: verl's ``pred``; else, with a task,
the task's parser on the completion; else absent, and the answer statistics are n/a), never the gold;
``gold`` is the reference answer (verl's ``gts``, prime-rl's task answer, SkyRL's
``reward_spec.ground_truth``), used only to verify. Correctness: a correctness column (verl: ``acc``),
else the reward column, each binary or read under a named rule (:mod:`rlvr.eval.correctness`); with a
task, its verifier decides the rows without one (all rows with ``reverify``), against the task's
problem whose prompt is the row's prompt, else against the row's gold. Samples are grouped into
problems by ``problem_id`` when mapped, else by prompt text.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from rlvr.errors import UserError
from rlvr.eval.chat_text import completion_text, prompt_messages
from rlvr.eval.correctness import Rule, ScoreRule, score_of
from rlvr.eval.counts import iter_count_samples
from rlvr.eval.peer_records import FLATTEN, PEER_COLUMNS
from rlvr.eval.run_folders import step_files
from rlvr.eval.samples import iter_samples, validate_row
from rlvr.eval.tables import iter_table
from rlvr.paths import parse_json_line
from rlvr.problems import Problem, prompt_key
from rlvr.rewards.verify import verify_all

FORMATS = ("auto", "rlvr", "trl", "verl", "prime-rl", "skyrl", "nemo-rl", "counts", "table")
FIELDS = ("problem_id", "prompt", "completion", "answer", "gold", "correct", "reward", "n")
TRL_FIXED = ("step", "prompt", "completion", "advantage", "image")
VERL_MAP = {"prompt": "input", "completion": "output", "gold": "gts", "reward": "score"}
VERL_NO_ANSWER = "[INVALID]"  # math_dapo's pred when it parsed nothing (verl/utils/reward_score/math_dapo.py)


# ----------------------------------------------------------------------------- formats
def detect(rows: list[dict], path: str | Path = "") -> str:
    """The format of ``rows`` judged by their columns; else a UserError asking for --format table --columns."""
    cols = set(rows[0]) if rows else set()
    if "problem_id" in cols and ({"correct", "reward"} & cols):
        return "rlvr"
    if {"prompt", "completion", "advantage"} <= cols:
        return "trl"
    if {"input", "output", "score"} <= cols:
        return "verl"
    for fmt, needed in PEER_COLUMNS.items():
        if set(needed) <= cols:
            return fmt
    if {"n", "correct"} <= cols and ({"problem", "problem_id"} & cols):
        return "counts"
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
        base = dict(VERL_MAP, **{field: col for field, col in (("correct", "acc"), ("answer", "pred")) if col in cols})
    elif fmt in FLATTEN:  # flattened records carry rlvr's field names
        base = {f: f for f in FIELDS if f in cols}
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
    mapping = {**base, **columns}
    if "n" in mapping:
        raise UserError(f"{path}: the field n belongs to --format counts; drop n= from --columns")
    missing = [c for c in mapping.values() if c not in cols]
    if missing:
        raise UserError(f"{path}: no column(s) {missing} (the file has {cols}); fix --columns")
    if "completion" not in mapping or ("correct" not in mapping and "reward" not in mapping and task is None):
        raise UserError(f"{path}: map a completion column and one of correct / reward, or pass --task NAME "
                        "(e.g. --columns prompt=question,completion=response,correct=is_right)")
    if "prompt" not in mapping and "problem_id" not in mapping:
        raise UserError(f"{path}: map a prompt or problem_id column (samples are grouped by problem)")
    return mapping


def _problem_id(prompt: str) -> str:
    return "p" + hashlib.sha1(prompt.encode("utf-8")).hexdigest()[:12]


def _cell_text(value: Any) -> str | None:
    """A cell as text; None for an empty / NaN cell."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return value if isinstance(value, str) else str(value)


def _model_answer(value: Any) -> str | None:
    text = _cell_text(value)
    return None if text is None or text.strip() in ("", VERL_NO_ANSWER) else text


def to_sample(r: dict, mapping: dict[str, str], source: str) -> dict:
    """One table row -> an rlvr samples row (problem_id, completion, source, prompt?, answer?, gold?),
    without correctness or reward (:func:`iter_imported` adds them)."""
    prompt = prompt_messages(r.get(mapping["prompt"])) if "prompt" in mapping else None
    if isinstance(prompt, list):  # chat messages
        prompt = json.dumps(prompt, ensure_ascii=False, sort_keys=True)
    s: dict[str, Any] = {
        "problem_id": str(r[mapping["problem_id"]]) if "problem_id" in mapping else _problem_id(str(prompt)),
        "completion": completion_text(r.get(mapping["completion"])),
        "source": source,
    }
    if prompt is not None:
        s["prompt"] = str(prompt)
    if "answer" in mapping:
        s["answer"] = _model_answer(r.get(mapping["answer"]))
    if "gold" in mapping and _cell_text(r.get(mapping["gold"])) is not None:
        s["gold"] = _cell_text(r.get(mapping["gold"]))
    return s


def task_problems(task: Any) -> dict[str, Problem]:
    """prompt key -> the task's problem with that prompt, over every split the task has (the problem
    carries what its verifier needs, e.g. the tests of a code task)."""
    by_prompt: dict[str, Problem] = {}
    for split in ("train", "heldout"):
        try:
            split_problems = task.problems(split)
        except UserError:  # a test-set task (humaneval) has no train split; a hub task offline
            continue
        for p in split_problems:
            by_prompt.setdefault(prompt_key(p.prompt), p)
    return by_prompt


def verify_with_task(samples: list[dict], task: Any, path: str | Path = "", reverify: bool = False,
                     by_prompt: dict[str, Problem] | None = None) -> list[dict]:
    """Run ``task``'s verifier on every row: its parsed answer becomes the row's ``answer`` where the file
    gave none (None: nothing parsed), its verdict the row's ``correct`` where the file gave none (every
    row with ``reverify``). Each row is checked against the task's problem with the same prompt
    (``by_prompt``, default :func:`task_problems`), else against the row's gold; neither -> UserError."""
    by_prompt = task_problems(task) if by_prompt is None else by_prompt
    problems = []
    for s in samples:
        if "prompt" in s and prompt_key(s["prompt"]) in by_prompt:  # text, or chat messages
            problems.append(by_prompt[prompt_key(s["prompt"])])
        elif "gold" in s:
            problems.append(Problem(s["problem_id"], s.get("prompt", ""), s["gold"]))
        else:
            raise UserError(f"{path}: a prompt ({s.get('prompt', '')[:60]!r}) is not a problem of task "
                            f"{getattr(task, 'name', task)!r} and the file has no gold-answer column; map gold=COL")
    for s, verdict in zip(samples, verify_all(task, [s["completion"] for s in samples], problems)):
        if reverify or "correct" not in s:
            s["correct"] = verdict.status == "right"
        s.setdefault("answer", verdict.answer)
    return samples


def load_any(path: str | Path, fmt: str = "auto", columns: str | None = None, task: Any = None,
             rule: Rule = None, reverify: bool = False) -> list[dict]:
    """Samples rows from a file in any supported format (module docstring), ready for pass@k; a run
    folder (:mod:`rlvr.eval.run_folders`) gives all its steps' rows together (:func:`load_steps` per step).
    The rows of :func:`iter_any`, in a list."""
    return list(iter_any(path, fmt, columns, task, rule, reverify))


def load_steps(folder: str | Path, fmt: str = "auto", columns: str | None = None, task: Any = None,
               rule: Rule = None, reverify: bool = False) -> dict[int, list[dict]]:
    """step -> samples rows of a run folder's dump files (:func:`rlvr.eval.run_folders.step_files`)."""
    return {step: [row for f in files for row in iter_imported(f, fmt, columns, task, rule, reverify)]
            for step, files in step_files(folder).items()}


def iter_any(path: str | Path, fmt: str = "auto", columns: str | None = None, task: Any = None,
             rule: Rule = None, reverify: bool = False, quiet: bool = True) -> Iterator[dict]:
    """:func:`iter_imported` of a file, or of every dump file of a run folder, steps in order."""
    if not Path(path).is_dir():
        yield from iter_imported(path, fmt, columns, task, rule, reverify, quiet)
        return
    for files in step_files(path).values():
        for f in files:
            yield from iter_imported(f, fmt, columns, task, rule, reverify, quiet)


def iter_imported(path: str | Path, fmt: str = "auto", columns: str | None = None, task: Any = None,
                  rule: Rule = None, reverify: bool = False, quiet: bool = True) -> Iterator[dict]:
    """The validated samples rows of a file in any supported format (module docstring), one at a time:
    the file is read once (twice under the rule ``max``, whose largest score is found first), so memory
    is bounded by a row (a parquet batch; a ``.json`` document is parsed whole). Progress on stderr
    unless ``quiet``. A file's errors (a bad row, partial scores without a rule) raise when met; the
    partial-scores error after the last row. A file that is not text (nor parquet) is a UserError naming it."""
    try:
        yield from _iter_file(path, fmt, columns, task, rule, reverify, quiet)
    except UnicodeDecodeError as e:
        raise not_utf8_error(path, e) from None


def not_utf8_error(path: str | Path, error: UnicodeDecodeError) -> UserError:
    """The one-line error for a samples file that is not UTF-8 text (nor parquet)."""
    return UserError(f"{path}: not UTF-8 text ({error.reason} at byte {error.start}); give a samples file: JSONL, "
                     "CSV or parquet")


def _iter_file(path: str | Path, fmt: str, columns: str | None, task: Any, rule: Rule, reverify: bool,
               quiet: bool) -> Iterator[dict]:
    if fmt not in FORMATS:
        raise UserError(f"unknown --format {fmt!r}; use {' | '.join(FORMATS)}")
    if reverify and task is None:
        raise UserError("--reverify re-scores completions with a task's verifier; pass --task NAME too")
    if reads_as_rlvr_samples(path, fmt, columns):
        yield from iter_samples(path, quiet)
        return
    cols = parse_columns(columns)
    records = iter_table(path, quiet)
    first = next(records, None)
    if first is None:
        raise UserError(f"{path}: no rows")
    if fmt == "auto":
        fmt = "table" if cols and not _known([first]) else detect([first], path)
    if fmt == "rlvr":
        yield from iter_samples(path, quiet)
        return
    records = itertools.chain([first], records)
    if fmt == "counts":
        yield from iter_count_samples(records, cols, path)
        return
    flatten = FLATTEN.get(fmt)
    mapping = column_map([flatten(first) if flatten else first], fmt, cols, task, path)
    largest = _largest_score(path, mapping, flatten) if rule == "max" and not reverify else None
    rows = map(flatten, records) if flatten else records
    samples = _scored(rows, mapping, fmt, path, rule, largest, use_file_correctness=not reverify)
    if task is not None:
        samples = _verified(samples, task, path, reverify)
    for i, s in enumerate(samples, start=1):
        if s.get("correct") is None:
            raise UserError(f"{path} row {i}: no correctness (empty score); map correct=COL or pass --task NAME")
        validate_row(s, f"{path} row {i}")
        yield s


def reads_as_rlvr_samples(path: str | Path, fmt: str = "auto", columns: str | None = None) -> bool:
    """Whether ``path`` is read as rlvr's own samples.jsonl (:func:`rlvr.eval.samples.iter_samples`):
    ``fmt`` rlvr, or auto with a .jsonl file whose first row has ``problem_id`` and no column mapping."""
    return fmt == "rlvr" or (fmt == "auto" and Path(path).suffix.lower() == ".jsonl" and not parse_columns(columns)
                             and _is_rlvr(path))


def _scored(rows: Iterable[dict], mapping: dict[str, str], source: str, path: str | Path, rule: Rule,
            largest: float | None, use_file_correctness: bool = True) -> Iterator[dict]:
    """Samples rows with ``reward`` (the reward column) and ``correct`` (the correctness column, else the
    reward column; binary, or under ``rule``: :class:`rlvr.eval.correctness.ScoreRule`); no ``correct``
    when ``use_file_correctness`` is False (a task re-verifies)."""
    column = mapping.get("correct", mapping.get("reward")) if use_file_correctness else None
    judge = ScoreRule(rule, column or "", str(path), largest) if column is not None else None
    for i, r in enumerate(rows, start=1):
        s = to_sample(r, mapping, source)
        if "reward" in mapping:
            reward = score_of(r.get(mapping["reward"]), mapping["reward"], f"{path} row {i}")
            if reward is not None:
                s["reward"] = reward
        if judge is not None:
            ok = judge.correct(score_of(r.get(column), column, f"{path} row {i}"))
            if ok is not None:
                s["correct"] = ok
        yield s
    if judge is not None:
        judge.finish()


def _largest_score(path: str | Path, mapping: dict[str, str], flatten: Any) -> float:
    """The largest score of the correctness (else reward) column: a first read for the rule ``max``."""
    column = mapping.get("correct", mapping.get("reward"))
    if column is None:
        return 0.0
    scores = (score_of((flatten(r) if flatten else r).get(column), column, f"{path} row {i}")
              for i, r in enumerate(iter_table(path), start=1))
    return max((s for s in scores if s is not None), default=0.0)


def _verified(samples: Iterable[dict], task: Any, path: str | Path, reverify: bool,
              batch: int = 256) -> Iterator[dict]:
    """:func:`verify_with_task` over ``batch`` rows at a time."""
    by_prompt = task_problems(task)
    pending: list[dict] = []
    for s in samples:
        pending.append(s)
        if len(pending) == batch:
            yield from verify_with_task(pending, task, path, reverify, by_prompt)
            pending = []
    if pending:
        yield from verify_with_task(pending, task, path, reverify, by_prompt)


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
                    row = parse_json_line(line)
                except json.JSONDecodeError:
                    return True  # let the rlvr loader report the bad line
                return isinstance(row, dict) and "problem_id" in row
    return True
