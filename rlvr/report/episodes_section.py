"""The episodes section of the run report: a tool task's episode statistics, one table.

For each run that has them: policy turns and tool calls per episode, the share of calls that failed,
the share of episodes with a call, and the success (pass rate) of the episodes with and without a
call; from training (``metrics.jsonl``: the mean of the first and of the last ``EDGE_STEPS``
logged steps) and from evaluation (``eval.json``'s ``tool_calls`` block of the base and the trained
model). Runs of single-turn tasks have none of these and get no row; with no such run the section
is left out of the page.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from rlvr.report.html_parts import esc, table
from rlvr.report.run_data import RunData, eval_block

EDGE_STEPS = 5
"""Training rows average this many logged steps at each end (the per-step values are noisy)."""

HEAD = ["run", "from", "turns / episode", "tool calls / episode", "failed-call share", "episodes with a call",
        "success with a call", "success without a call", "env tokens / episode"]

# metrics.jsonl keys in HEAD's order (None: not logged in training)
TRAINING_KEYS = ("turns", "tool_calls", "failed_call_share", None, "pass_rate_with_call", "pass_rate_without_call",
                 "env_tokens")
# eval.json tool_calls keys in HEAD's order
EVAL_KEYS = ("turns_per_episode", "calls_per_episode", "failed_call_share", "episodes_with_call", "accuracy_with_call",
             "accuracy_without_call", "env_tokens_per_episode")


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _edge_mean(rows: Sequence[Mapping], key: str | None, last: bool) -> float | None:
    """The mean of ``key`` over the first (last) EDGE_STEPS rows that logged it; None if none did."""
    if key is None:
        return None
    logged = [r for r in rows if key in r]
    edge = logged[-EDGE_STEPS:] if last else logged[:EDGE_STEPS]
    values = [r[key] for r in edge if _finite(r[key])]  # NaN: no episode of that kind at that step
    return math.fsum(values) / len(values) if values else None


def training_rows(run: RunData) -> list[list[Any]]:
    """The run's first and last training rows of the table; [] when it logged no tool calls."""
    if not any("tool_calls" in r for r in run.rows):
        return []
    steps = [r["step"] for r in run.rows if "tool_calls" in r and "step" in r]
    first, last = (steps[:EDGE_STEPS], steps[-EDGE_STEPS:]) if steps else ([], [])
    return [[run.name, f"training, steps {_span(edge)}", *[_edge_mean(run.rows, k, at_end) for k in TRAINING_KEYS]]
            for edge, at_end in ((first, False), (last, True))]


def _span(steps: Sequence[int]) -> str:
    return f"{steps[0]}-{steps[-1]}" if steps else "?"


def eval_rows(run: RunData) -> list[list[Any]]:
    """The run's evaluation rows (base, trained) with a ``tool_calls`` block."""
    out = []
    for model in ("base", "trained"):
        stats = eval_block(run.eval, model).get("tool_calls")
        if stats:
            out.append([run.name, f"eval.json: {model}", *[stats.get(k) for k in EVAL_KEYS]])
    return out


def episodes_section(runs: Sequence[RunData]) -> str:
    """The section's HTML; "" when no run has episode statistics."""
    rows = [row for run in runs for row in training_rows(run) + eval_rows(run)]
    if not rows:
        return ""
    return ('<section id="episodes"><h2>Tool episodes</h2>'
            + table(HEAD, rows, "episodes-table")
            + f"<p class='meta'>{esc(_CAPTION)}</p></section>")


_CAPTION = (f"Training rows: the mean over the first and the last {EDGE_STEPS} logged steps of the per-step "
            "episode metrics (success = the step's pass rate; a step with no episode of a kind is skipped). "
            "eval.json rows: the held-out samples of each model. Failed calls: the tool raised, timed out, "
            "was unknown or the call could not be read. Environment tokens are read by the model and never "
            "trained on or scored.")
