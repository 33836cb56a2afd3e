"""GSM8K (Cobbe et al. 2021): grade-school maths word problems with numeric answers.

Splits: ``train`` = GSM8K train (7473), ``heldout`` = GSM8K test (1319). Data comes from
local JSONL (default ``gsm8k_{train,test}.jsonl`` found by :func:`~rlvr.tasks.jsonl.data_file`:
``$RLVR_DATA_DIR``, then the packaged copy, which holds the test split only) or, when the file is
missing, from the hub (``openai/gsm8k``, config ``main``) through ``datasets``.

The reference answer is the number after ``#### `` (commas removed). Gold solutions are the
dataset's worked answers with the ``<<a*b=c>>`` calculator annotations removed and, with
``solution_format="boxed"`` (default, matching the prompt), the ``#### x`` line replaced by
``The final answer is \\boxed{x}.``; ``"raw"`` keeps the dataset text. Completions are scored
numerically (commas, ``$``, ``%``, trailing ``.0`` ignored; math-verify for non-plain numbers).
"""

from __future__ import annotations

import re
from pathlib import Path

from rlvr.errors import UserError
from rlvr.rewards.math import normalize_number, verify_numeric
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

HUB_NAME, HUB_CONFIG = "openai/gsm8k", "main"
FILES = {"train": "gsm8k_train.jsonl", "heldout": "gsm8k_test.jsonl"}
HUB_SPLITS = {"train": "train", "heldout": "test"}
_CALC_RE = re.compile(r"<<[^<>]*>>")


def final_answer(solution: str) -> str:
    """The canonical number after the last ``####`` of a GSM8K solution (ValueError if none)."""
    if "####" not in solution:
        raise ValueError("solution has no '#### <answer>' line")
    num = normalize_number(solution.rsplit("####", 1)[1].strip())
    if num is None:
        raise ValueError("text after '####' is not a number")
    return num


def gold_solution(solution: str, solution_format: str = "boxed") -> str:
    """Dataset solution without calculator annotations; ``####`` line boxed unless ``raw``."""
    if solution_format == "raw":
        return solution
    body, ans = solution.rsplit("####", 1)
    return f"{_CALC_RE.sub('', body).rstrip()}\nThe final answer is \\boxed{{{ans.strip()}}}."


class GSM8KTask(MathDatasetTask):
    """GSM8K as an rlvr task (see the module docstring)."""

    name = "gsm8k"

    def __init__(
        self,
        train_path: str | None = None,
        test_path: str | None = None,
        template: str = DEFAULT_TEMPLATE,
        solution_format: str = "boxed",
        bad_rows: str = "skip",
        use_hub: bool = True,
    ):
        if solution_format not in ("boxed", "raw"):
            raise UserError(f"solution_format={solution_format!r}; use 'boxed' or 'raw'")
        self.paths = {
            "train": Path(train_path) if train_path else data_file(FILES["train"]),
            "heldout": Path(test_path) if test_path else data_file(FILES["heldout"]),
        }
        self.template, self.solution_format, self.bad_rows, self.use_hub = (
            template,
            solution_format,
            bad_rows,
            use_hub,
        )
        self.skipped: dict[str, int] = {}  # split -> malformed rows skipped
        self._cache: dict[str, list[Problem]] = {}

    def _row(self, split: str):
        def row_fn(row: dict, i: int) -> Problem:
            sol = text_field(row, "answer")
            return Problem(
                id=f"gsm8k/{HUB_SPLITS[split]}/{i}",
                prompt=render(self.template, text_field(row, "question")),
                answer=final_answer(sol),
                solutions=(gold_solution(sol, self.solution_format),),
                meta={"split": split, "row": i},
            )

        return row_fn

    def problems(self, split: str, n: int | None = None) -> list[Problem]:
        check_split(split)
        if split not in self._cache:
            hub = (HUB_NAME, HUB_CONFIG, HUB_SPLITS[split]) if self.use_hub else None
            rows = load_split(self.paths[split], hub)
            self._cache[split], self.skipped[split] = build_problems(rows, self._row(split), self.bad_rows)
        return first_n(self._cache[split], n)

    def verify(self, completion: str, problem: Problem) -> Verdict:
        return verify_numeric(completion, problem.answer)
