"""Generic question/answer datasets: JSONL, JSON, Parquet, a local HF ``datasets`` directory
(``save_to_disk``) or a hub dataset, with column mapping.

:class:`JsonlTask` turns rows into :class:`~rlvr.tasks.base.Problem` objects through a column
map (``prompt``, ``answer``, optional ``solutions`` and ``id``), keeps chosen extra columns in
``Problem.meta`` (for reward functions, as TRL passes dataset columns), accepts a prompt column of
chat messages, and scores completions with a chosen verifier from :mod:`rlvr.rewards.math`
(``math`` | ``numeric`` | ``exact``). The loading
helpers here (:func:`read_rows`, :func:`load_split`, :func:`default_data_dir`, :func:`data_file`)
are shared with the GSM8K and MATH-500 tasks, as is their base class :class:`MathDatasetTask`
(math-verify equivalence, the chat form of a prompt).

Data files are looked up in ``$RLVR_DATA_DIR`` (when set), then in the copies packaged with rlvr
(``rlvr/data/``: the GSM8K test split and MATH-500, gzip-compressed, licences and attribution in
``rlvr/data/DATA_LICENSES.md``). A ``.jsonl.gz`` file is read like the ``.jsonl`` it compresses.

Malformed rows (missing field, wrong type, empty prompt or answer) are skipped and counted in
``task.skipped[split]`` (``bad_rows="skip"``, the default) or raise ``UserError``
(``bad_rows="error"``).
"""

from __future__ import annotations

import gzip
import json
import os
import socket
from collections.abc import Callable, Iterable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from rlvr.errors import UserError
from rlvr.rewards.math import VERIFIERS, math_equivalent
from rlvr.tasks.base import Problem, Verdict, default_equivalent
from rlvr.types import Prompt, check_messages, is_messages

SPLITS = ("train", "heldout")
RESERVED_META = ("split", "row")
"""``Problem.meta`` keys rlvr sets itself; extra columns may not take these names."""
BOXED_INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."
DEFAULT_TEMPLATE = "{question}\n\n" + BOXED_INSTRUCTION
RowFn = Callable[[dict, int], Problem]  # (row, index) -> Problem; raises ValueError/KeyError/TypeError if bad


def packaged_data_dir() -> Path:
    """The datasets shipped inside the package (``rlvr/data/``; see ``DATA_LICENSES.md`` there)."""
    return Path(str(resources.files("rlvr").joinpath("data")))


def default_data_dir() -> Path:
    """``$RLVR_DATA_DIR`` if set, else the packaged copies (:func:`packaged_data_dir`)."""
    env = os.environ.get("RLVR_DATA_DIR")
    return Path(env) if env else packaged_data_dir()


def data_file(name: str) -> Path:
    """Where the data file ``name`` (e.g. ``gsm8k_test.jsonl``) is read from.

    The first of ``name`` or ``name.gz`` that exists in ``$RLVR_DATA_DIR`` (when set), then in the
    packaged copies. When none exists, the path in the first directory, so that the caller can fall
    back to the hub or report the missing file.
    """
    dirs = [default_data_dir(), packaged_data_dir()]
    for d in dict.fromkeys(dirs):
        for candidate in (d / name, d / f"{name}.gz"):
            if candidate.is_file():
                return candidate
    return dirs[0] / name


def render(template: str, question: str) -> str:
    """``template`` with ``{question}`` replaced (plain replace: LaTeX braces are safe)."""
    return template.replace("{question}", question)


def to_messages(prompt: Prompt, system: str | None = None) -> list[dict[str, str]]:
    """The chat-messages form of a prompt: ``[{"role": "system"?}, {"role": "user"}]``; a prompt that is
    already messages is kept, with ``system`` put first unless it starts with a system message."""
    if is_messages(prompt):
        msgs = [dict(m) for m in prompt]
        has_system = bool(msgs) and msgs[0].get("role") == "system"
        return msgs if has_system or not system else [{"role": "system", "content": system}, *msgs]
    msgs = [{"role": "system", "content": system}] if system else []
    return [*msgs, {"role": "user", "content": prompt}]


def check_split(split: str) -> None:
    if split not in SPLITS:
        raise UserError(f"unknown split {split!r}; use one of {', '.join(SPLITS)}")


# ----------------------------------------------------------------------------- reading
def read_dataset_dir(path: str | Path, split: str | None = None) -> list[dict]:
    """Rows of a local HF ``datasets`` directory written by ``save_to_disk`` (read with ``load_from_disk``:
    no download). A ``DatasetDict`` directory needs ``split``, the name of one of its splits."""
    try:
        import datasets
    except ImportError as e:
        raise UserError(f"{str(path)!r} is a directory: reading a saved HF dataset needs the 'datasets' "
                        "package; pip install 'rlvr[data]'") from e
    try:
        ds = datasets.load_from_disk(str(path))
    except (FileNotFoundError, ValueError) as e:
        raise UserError(f"{str(path)!r} is not a dataset saved with save_to_disk ({e}); pass a .jsonl, "
                        ".json or .parquet file or such a directory") from None
    if isinstance(ds, datasets.DatasetDict):
        if split not in ds:
            raise UserError(f"{str(path)!r} holds the splits {sorted(ds)}; no {split!r} there: set the task's "
                            "hub_splits knob, e.g. {train: train, heldout: test}")
        ds = ds[split]
    return [dict(r) for r in ds]


def read_rows(path: str | Path, split: str | None = None) -> list[Any]:
    """Rows of a ``.jsonl`` / ``.json`` (list of objects) / ``.parquet`` file, in file order, or of a
    saved HF dataset directory (:func:`read_dataset_dir`; ``split`` picks a ``DatasetDict``'s split).

    ``.jsonl.gz`` and ``.json.gz`` are read as the file they compress. A JSONL line that is not
    valid JSON becomes a ``None`` row (counted as bad by the caller).
    """
    p = Path(path)
    if p.is_dir():
        return read_dataset_dir(p, split)
    if not p.is_file():
        raise UserError(f"dataset file {str(p)!r} not found; check the path or set RLVR_DATA_DIR")
    if p.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError as e:
            raise UserError("reading Parquet needs pyarrow; pip install pyarrow (or rlvr[data])") from e
        return pq.read_table(p).to_pylist()
    gz = p.suffix == ".gz"
    if gz:
        with gzip.open(p, "rt", encoding="utf-8") as f:
            text = f.read()
    else:
        text = p.read_text(encoding="utf-8")
    if Path(p.stem if gz else p.name).suffix == ".json":
        rows = json.loads(text)
        if not isinstance(rows, list):
            raise UserError(f"{str(p)!r} is not a JSON list of rows; use a list of objects or JSON Lines")
        return rows
    rows = []
    for line in text.splitlines():
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                rows.append(None)
    return rows


HUB_PROBE_TIMEOUT_S = 3.0
_TRUE = ("1", "on", "yes", "true")


def hub_offline_mode() -> bool:
    """True when the user asked for the hub's offline mode (``HF_HUB_OFFLINE`` or
    ``HF_DATASETS_OFFLINE``): ``datasets`` then reads its cache only, without network calls."""
    return any(os.environ.get(v, "").strip().lower() in _TRUE
               for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


def hub_reachable(timeout: float = HUB_PROBE_TIMEOUT_S) -> bool:
    """Whether a TCP connection to the hub's endpoint (``HF_ENDPOINT``, default huggingface.co)
    opens within ``timeout`` seconds: one quick probe instead of ``datasets``' retries (about 25 s
    offline before it gives up)."""
    url = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    port = url.port or (80 if url.scheme == "http" else 443)
    try:
        socket.create_connection((url.hostname or "", port), timeout=timeout).close()
    except OSError:
        return False
    return True


def read_hub(name: str, config: str | None, split: str) -> list[dict]:
    """Rows of a hub dataset via ``datasets`` (imported only here, only when asked).

    Without network (and without the offline mode that reads ``datasets``' cache) it fails at
    once with the way out, instead of after ``datasets``' retries."""
    if not hub_offline_mode() and not hub_reachable():
        raise UserError(
            f"no local file for {name!r} split {split!r} and the hub is unreachable; pass a local "
            "path or put the file in $RLVR_DATA_DIR (or set HF_DATASETS_OFFLINE=1 to read a copy "
            "that datasets cached earlier)"
        )
    try:
        import datasets
    except ImportError as e:
        raise UserError(
            f"no local file for {name!r} and the 'datasets' package is missing; "
            "pass a local path or pip install 'rlvr[data]'"
        ) from e
    try:
        ds = datasets.load_dataset(name, config, split=split)
    except Exception as e:  # noqa: BLE001 - network or name problems, reported as one line
        raise UserError(
            f"could not load {name!r} split {split!r} from the hub ({e}); pass a local path"
        ) from e
    return [dict(r) for r in ds]


def load_split(path: str | Path | None, hub: tuple[str, str | None, str] | None,
               dir_split: str | None = None) -> list[Any]:
    """Rows from ``path`` (a file, or a saved dataset directory: its ``dir_split`` split when it holds
    several) when it exists, else from ``hub=(name, config, split)``."""
    if path is not None and Path(path).exists():
        return read_rows(path, dir_split)
    if hub is None:
        where = f"{str(path)!r} not found" if path is not None else "no path given"
        raise UserError(f"no data for this split ({where}); pass an existing file path")
    return read_hub(*hub)


def build_problems(rows: Iterable[Any], row_fn: RowFn, bad_rows: str) -> tuple[list[Problem], int]:
    """Apply ``row_fn`` to every row; returns (problems, number of skipped bad rows)."""
    if bad_rows not in ("skip", "error"):
        raise UserError(f"bad_rows={bad_rows!r}; use 'skip' or 'error'")
    out: list[Problem] = []
    skipped = 0
    for i, row in enumerate(rows):
        try:
            if not isinstance(row, dict):
                raise TypeError(f"row is {type(row).__name__}, not an object")
            out.append(row_fn(row, i))
        except (KeyError, TypeError, ValueError) as e:
            if bad_rows == "error":
                raise UserError(
                    f"bad row {i} ({type(e).__name__}: {e}); fix it or pass bad_rows='skip'"
                ) from e
            skipped += 1
    return out, skipped


def text_field(row: dict, key: str) -> str:
    """A required non-empty text field (numbers are accepted and stringified)."""
    v = row[key]
    if isinstance(v, bool) or not isinstance(v, (str, int, float)):
        raise TypeError(f"field {key!r} is {type(v).__name__}, expected text")
    s = str(v)
    if not s.strip():
        raise ValueError(f"field {key!r} is empty")
    return s


def prompt_field(row: dict, key: str) -> Prompt:
    """A required prompt: non-empty text (numbers stringified) or a list of chat messages."""
    if isinstance(row.get(key), list):
        return check_messages(row[key])
    return text_field(row, key)


def solutions_field(row: dict, key: str | None) -> tuple[str, ...]:
    """Optional gold solutions: a string or a list of strings."""
    if key is None or row.get(key) is None:
        return ()
    v = row[key]
    vals = [v] if isinstance(v, str) else v
    if not isinstance(vals, list) or not all(isinstance(s, str) for s in vals):
        raise TypeError(f"field {key!r} must be a string or a list of strings")
    return tuple(s for s in vals if s.strip())


# ----------------------------------------------------------------------------- the tasks
class MathDatasetTask:
    """What the math datasets (GSM8K, MATH-500) share: answers compared as math-verify compares them,
    and the chat form of a prompt. A subclass provides ``name``, ``problems`` and ``verify``."""

    def equivalent(self, a: str, b: str) -> bool:
        """math-verify equivalence, bounded (:func:`rlvr.rewards.math.math_equivalent`): "0.5" == "1/2"."""
        return math_equivalent(a, b)

    def messages(self, problem: Problem, system: str | None = None) -> list[dict[str, str]]:
        """The chat-messages form of ``problem.prompt`` (:func:`to_messages`)."""
        return to_messages(problem.prompt, system)


class JsonlTask:
    """Any question/answer dataset with a column map and a verifier.

    ``train`` / ``heldout``: file paths (``.jsonl``, ``.json``, ``.parquet``) or directories saved by
    ``datasets``' ``save_to_disk`` (a ``DatasetDict``'s split is chosen by ``hub_splits``); or ``hub`` (a
    ``datasets`` name, with ``hub_config`` and ``hub_splits`` = {split: hub split}) used for
    splits without a file. ``columns`` maps ``prompt``, ``answer`` and optionally ``solutions``
    and ``id`` to the dataset's column names. A prompt column may hold chat messages (kept as
    messages; ``template`` applies to text prompts only). ``extra_columns`` (a list of column
    names, or ``"all"`` = every column not mapped to a role) are copied into ``Problem.meta``
    under their own names. ``template`` must contain ``{question}``.
    """

    def __init__(
        self,
        train: str | None = None,
        heldout: str | None = None,
        columns: dict[str, str] | None = None,
        verifier: str = "math",
        template: str = DEFAULT_TEMPLATE,
        hub: str | None = None,
        hub_config: str | None = None,
        hub_splits: dict[str, str] | None = None,
        bad_rows: str = "skip",
        name: str = "jsonl",
        extra_columns: list[str] | str = (),
    ):
        if verifier not in VERIFIERS:
            raise UserError(f"unknown verifier {verifier!r}; use one of {', '.join(VERIFIERS)}")
        if "{question}" not in template:
            raise UserError("template has no {question} placeholder; add '{question}' where the problem goes")
        cols = {"prompt": "prompt", "answer": "answer", "solutions": None, "id": None}
        unknown = set(columns or {}) - set(cols)
        if unknown:
            raise UserError(f"unknown column roles {sorted(unknown)}; use prompt, answer, solutions, id")
        cols.update(columns or {})
        if isinstance(extra_columns, str) and extra_columns != "all":
            raise UserError(f"extra_columns={extra_columns!r}; use a list of column names or 'all'")
        extra = extra_columns if isinstance(extra_columns, str) else list(extra_columns)
        bad = [c for c in ([] if extra == "all" else extra) if not isinstance(c, str) or c in RESERVED_META]
        if bad:
            raise UserError(f"extra_columns {bad}: names must be strings other than {', '.join(RESERVED_META)} "
                            "(rlvr's own meta keys)")
        self.extra_columns = extra
        self.name, self.columns, self.template, self.bad_rows = name, cols, template, bad_rows
        self.paths = {"train": train, "heldout": heldout}
        self.hub, self.hub_config = hub, hub_config
        self.hub_splits = hub_splits or {"train": "train", "heldout": "test"}
        self._verify = VERIFIERS[verifier]
        self._equivalent = default_equivalent if verifier == "exact" else math_equivalent
        self.skipped: dict[str, int] = {}
        self._cache: dict[str, list[Problem]] = {}

    def _row(self, split: str) -> RowFn:
        c = self.columns

        def row_fn(row: dict, i: int) -> Problem:
            rid = str(row[c["id"]]) if c["id"] else f"{self.name}/{split}/{i}"
            prompt = prompt_field(row, c["prompt"])
            return Problem(
                id=rid,
                prompt=prompt if is_messages(prompt) else render(self.template, prompt),
                answer=text_field(row, c["answer"]).strip(),
                solutions=solutions_field(row, c["solutions"]),
                meta={**self._extras(row), "split": split, "row": i},
            )

        return row_fn

    def _extras(self, row: dict) -> dict:
        """The extra columns of ``row`` (KeyError if one is missing: the row is bad)."""
        if self.extra_columns != "all":
            return {k: row[k] for k in self.extra_columns}
        roles = {v for v in self.columns.values() if v}
        clash = [k for k in row if k in RESERVED_META and k not in roles]
        if clash:
            raise UserError(f"extra_columns='all' would copy column {clash[0]!r} over rlvr's meta key of that name; "
                            "list the columns to keep instead")
        return {k: v for k, v in row.items() if k not in roles}

    def problems(self, split: str, n: int | None = None) -> list[Problem]:
        check_split(split)
        if split not in self._cache:
            hub = (
                (self.hub, self.hub_config, self.hub_splits[split])
                if self.hub and split in self.hub_splits
                else None
            )
            rows = load_split(self.paths[split], hub, self.hub_splits.get(split))
            self._cache[split], self.skipped[split] = build_problems(rows, self._row(split), self.bad_rows)
        return first_n(self._cache[split], n)

    def verify(self, completion: str, problem: Problem) -> Verdict:
        return self._verify(completion, problem.answer)

    def equivalent(self, a: str, b: str) -> bool:
        """As the verifier compares: math-verify (``math``, ``numeric``; bounded) or stripped strings (``exact``)."""
        return self._equivalent(a, b)

    def messages(self, problem: Problem, system: str | None = None) -> list[dict[str, str]]:
        """The chat-messages form of ``problem.prompt`` (:func:`to_messages`)."""
        return to_messages(problem.prompt, system)


def first_n(items: Sequence[Problem], n: int | None) -> list[Problem]:
    return list(items[:n]) if n is not None else list(items)
