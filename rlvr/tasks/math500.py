"""MATH-500 (Lightman et al. 2023): the 500-problem subset of the MATH test set.

MATH-500 has only a test split: ``heldout`` is all 500 problems and asking for ``train``
raises ``UserError`` (train on ``gsm8k`` or a ``jsonl`` task and evaluate here). Data comes
from local JSONL (default ``math500_test.jsonl`` found by :func:`~rlvr.tasks.jsonl.data_file`:
``$RLVR_DATA_DIR``, then the copy packaged with rlvr) or, when the file is missing,
from the hub (``HuggingFaceH4/MATH-500``) through ``datasets``.

The reference answer is the dataset's ``answer`` (LaTeX); the gold solution is ``solution``
(ending in ``\\boxed{answer}``); ids are the dataset's ``unique_id``; ``meta`` holds
``subject`` and ``level``. Completions are scored by math-verify equivalence of the last
``\\boxed{}`` (:func:`rlvr.rewards.math.verify_math`).
"""

from __future__ import annotations

from pathlib import Path

from rlvr.errors import UserError
from rlvr.rewards.math import verify_math
from rlvr.tasks.base import Problem, Verdict
from rlvr.tasks.jsonl import (
    DEFAULT_TEMPLATE,
    MathDatasetTask,
    build_problems,
    check_split,
    data_file,
    first_n,
    load_split,
    render,
    text_field,
)

HUB_NAME, FILE = "HuggingFaceH4/MATH-500", "math500_test.jsonl"


class Math500Task(MathDatasetTask):
    """MATH-500 as an rlvr task (held-out only; see the module docstring)."""

    name = "math500"

    def __init__(
        self,
        path: str | None = None,
        template: str = DEFAULT_TEMPLATE,
        bad_rows: str = "skip",
        use_hub: bool = True,
    ):
        self.path = Path(path) if path else data_file(FILE)
        self.template, self.bad_rows, self.use_hub = template, bad_rows, use_hub
        self.skipped: dict[str, int] = {}  # split -> malformed rows skipped
        self._cache: list[Problem] | None = None

    def _row(self, row: dict, i: int) -> Problem:
        return Problem(
            id=str(row.get("unique_id") or f"math500/test/{i}"),
            prompt=render(self.template, text_field(row, "problem")),
            answer=text_field(row, "answer").strip(),
            solutions=(text_field(row, "solution"),),
            meta={"split": "heldout", "row": i, "subject": row.get("subject"), "level": row.get("level")},
        )

    def problems(self, split: str, n: int | None = None) -> list[Problem]:
        check_split(split)
        if split == "train":
            raise UserError(
                "math500 has only a test split; use split='heldout' (train on gsm8k or a jsonl task)"
            )
        if self._cache is None:
            rows = load_split(self.path, (HUB_NAME, None, "test") if self.use_hub else None)
            self._cache, self.skipped["heldout"] = build_problems(rows, self._row, self.bad_rows)
        return first_n(self._cache, n)

    def verify(self, completion: str, problem: Problem) -> Verdict:
        return verify_math(completion, problem.answer)
