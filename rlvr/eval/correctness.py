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

BINARY_SETS = ({0.0, 1.0}, {-1.0, 1.0})
"""Numeric value sets read as binary without a rule: 0/1 and -1/1 (correct is the larger)."""

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


def scores_of(values: Sequence[Any], column: str, path: str = "") -> list[float | None]:
    """(B,) the column's cells as floats (None where empty); a non-numeric cell is a UserError."""
    return [_number(v, f"{path} row {i}", column) for i, v in enumerate(values, start=1)]


def correct_from_scores(scores: Sequence[float | None], rule: Rule, column: str, path: str = "",
                        ) -> list[bool | None]:
    """(B,) correctness from (B,) scores (None stays None) under ``rule`` (module docstring).

    Without a rule the column must be binary, else a one-line UserError saying how to name one."""
    present = [s for s in scores if s is not None]
    if rule is None:
        seen = set(present)
        if not any(seen <= allowed for allowed in BINARY_SETS):
            shown = ", ".join(f"{v:g}" for v in sorted(seen)[:6]) + (", ..." if len(seen) > 6 else "")
            raise UserError(f"{path}: column {column!r} holds partial scores ({shown}), not just right/wrong; "
                            "say which count as correct: --correct-threshold T (score >= T) or "
                            "--correct-threshold max (score == the largest)")
        return [None if s is None else s > 0 for s in scores]
    cut = max(present, default=0.0) if rule == "max" else float(rule)
    return [None if s is None else s >= cut for s in scores]
