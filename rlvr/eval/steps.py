"""A run folder's samples by logged step: the eval.json block of each step and of all steps pooled."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rlvr.errors import UserError
from rlvr.eval.passk import default_ks
from rlvr.eval.summary import Equal, Row, summarize_tallies
from rlvr.eval.tally import Tallies, merge_tallies, tally_rows


def summarize_steps(rows_by_step: Mapping[int, Sequence[Row]], ks: Sequence[int] | None = None, seed: int = 0,
                    equal: Equal | None = None) -> dict[str, Any]:
    """:func:`summarize_step_tallies` of each step's validated sample rows."""
    return summarize_step_tallies({step: tally_rows(rows) for step, rows in rows_by_step.items()}, ks, seed, equal)


def summarize_step_tallies(tallies_by_step: Mapping[int, Tallies], ks: Sequence[int] | None = None, seed: int = 0,
                           equal: Equal | None = None) -> dict[str, Any]:
    """``{"steps": [...], "per_step": {step: summary}, "pooled": summary}``, every block on the same ks
    (default: powers of two up to the smallest n of any step, plus it). Pooled: every step's samples
    together (in the order the steps were given), a problem seen at several steps holding all its samples."""
    if not tallies_by_step or not all(tallies_by_step.values()):
        raise UserError("the run folder has no steps with samples; pass a folder with dump files")
    n_min = min(t.n for tallies in tallies_by_step.values() for t in tallies.values())
    ks = list(ks) if ks is not None else default_ks(n_min)
    per_step = {str(step): summarize_tallies(tallies, ks, seed, equal)
                for step, tallies in sorted(tallies_by_step.items())}
    pooled = summarize_tallies(merge_tallies(tallies_by_step.values()), ks, seed, equal)
    return {"steps": sorted(tallies_by_step), "per_step": per_step, "pooled": pooled}
