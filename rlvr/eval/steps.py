"""A run folder's samples by logged step: the eval.json block of each step and of all steps pooled."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from rlvr.errors import UserError
from rlvr.eval.passk import default_ks
from rlvr.eval.summary import Equal, Row, summarize


def summarize_steps(rows_by_step: Mapping[int, Sequence[Row]], ks: Sequence[int] | None = None, seed: int = 0,
                    equal: Equal | None = None) -> dict[str, Any]:
    """``{"steps": [...], "per_step": {step: summary}, "pooled": summary}``, every block on the same ks
    (default: powers of two up to the smallest n of any step, plus it). Pooled: every step's samples
    together, a problem seen at several steps holding all its samples."""
    if not rows_by_step:
        raise UserError("the run folder has no steps with samples; pass a folder with dump files")
    n_min = min(min(Counter(r["problem_id"] for r in rows).values()) for rows in rows_by_step.values())
    ks = list(ks) if ks is not None else default_ks(n_min)
    per_step = {str(step): summarize(rows, ks, seed, equal) for step, rows in sorted(rows_by_step.items())}
    pooled = summarize([r for rows in rows_by_step.values() for r in rows], ks, seed, equal)
    return {"steps": sorted(rows_by_step), "per_step": per_step, "pooled": pooled}
