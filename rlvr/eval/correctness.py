"""Correctness of imported samples from a score column: binary columns as they are, anything else
only under a rule the user names (a partial score is never taken for "solved").

A column is binary when every value is a bool, or every number lies in {0, 1}, or every number lies
in {-1, 1} (verl's DAPO and math scorers: 1 right, -1 wrong). Otherwise (e.g. verl's gsm8k scorer
with ``format_score=0.1``: 0, 0.1 or 1) the user says which scores count as correct:
``--correct-threshold T`` (score >= T) or ``--correct-threshold max`` (score == the largest score in
the file).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from rlvr.errors import UserError

Rule = float | str | None
"""None (the column must be binary), a threshold T (score >= T), or "max" (score == the largest)."""


def parse_rule(text: str | None) -> Rule:
    """``--correct-threshold`` text -> a rule: None, a float, or "max"."""
    if text is None:
        return None
    if text.strip().lower() == "max":
        return "max"
    try:
        value = float(text)
    except ValueError:
        raise UserError(f"--correct-threshold must be a number or 'max', got {text!r}; "
                        "e.g. --correct-threshold 1 or --correct-threshold max") from None
    if not math.isfinite(value):
        raise UserError(f"--correct-threshold must be finite, got {text!r}; e.g. --correct-threshold 1")
    return value


def _number(value: Any, where: str, column: str) -> float | None:
    """A score as a float (bools as 0/1; 'true'/'false' text too); None for an empty cell."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "yes", "no"):
        return float(value.strip().lower() in ("true", "yes"))
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise UserError(f"{where}: {column}={value!r:.40} is not a score or true/false; map another column") \
            from None
    return None if math.isnan(number) else number


def score_of(value: Any, column: str, where: str) -> float | None:
    """One cell as a score (None where empty); a non-numeric cell is a UserError naming ``where``."""
    return _number(value, where, column)


def scores_of(values: Sequence[Any], column: str, path: str = "") -> list[float | None]:
    """(B,) the column's cells as floats (None where empty); a non-numeric cell is a UserError."""
    return [_number(v, f"{path} row {i}", column) for i, v in enumerate(values, start=1)]


class ScoreRule:
    """Correctness from scores one at a time under ``rule`` (module docstring), for a file read once.

    Without a rule a score is correct when > 0, and ``finish()`` (after the last score) raises the
    partial-scores UserError when the column was not binary after all; the rule ``max`` needs the
    file's largest score, ``largest``, found beforehand. Memory: the 7 smallest distinct scores."""

    SHOWN = 6

    def __init__(self, rule: Rule, column: str, path: str = "", largest: float | None = None):
        if rule == "max" and largest is None:
            raise ValueError("the rule 'max' needs the largest score; read the column first")
        self.rule, self.column, self.path = rule, column, path
        self.cut = None if rule is None else (largest if rule == "max" else float(rule))
        self.smallest: list[float] = []  # the SHOWN + 1 smallest distinct scores, ascending
        self.zero = self.minus_one = self.other = False

    def correct(self, score: float | None) -> bool | None:
        if score is None:
            return None
        if self.cut is not None:
            return score >= self.cut
        if score == 0.0:
            self.zero = True
        elif score == -1.0:
            self.minus_one = True
        elif score != 1.0:
            self.other = True
        if score not in self.smallest and (len(self.smallest) <= self.SHOWN or score < self.smallest[-1]):
            self.smallest = sorted([*self.smallest, score])[: self.SHOWN + 1]
        return score > 0

    def finish(self) -> None:
        """Raise the partial-scores UserError when, without a rule, the scores were not binary."""
        if self.cut is None and (self.other or (self.zero and self.minus_one)):
            more = len(self.smallest) > self.SHOWN
            shown = ", ".join(f"{v:g}" for v in self.smallest[: self.SHOWN]) + (", ..." if more else "")
            raise UserError(f"{self.path}: column {self.column!r} holds partial scores ({shown}), not just "
                            "right/wrong; say which count as correct: --correct-threshold T (score >= T) or "
                            "--correct-threshold max (score == the largest)")


def correct_from_scores(scores: Sequence[float | None], rule: Rule, column: str, path: str = "",
                        ) -> list[bool | None]:
    """(B,) correctness from (B,) scores (None stays None) under ``rule`` (module docstring).

    Without a rule the column must be binary, else a one-line UserError saying how to name one."""
    largest = max((s for s in scores if s is not None), default=0.0) if rule == "max" else None
    judge = ScoreRule(rule, column, path, largest)
    verdicts = [judge.correct(s) for s in scores]
    judge.finish()
    return verdicts
