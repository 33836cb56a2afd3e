"""A run's metrics series (the lines of ``metrics.jsonl`` as :func:`rlvr.log.read_metrics` returns them):
per-epoch means, the line-by-line mean of several runs (e.g. seeds), and the lines without their
wall-clock measurements (what two runs of one deterministic config share). Pure Python over plain rows.
"""

from __future__ import annotations

from rlvr.errors import UserError

WALL_CLOCK_KEYS = frozenset({
    "wall_s", "gen_s", "train_s", "score_s", "scored_per_s",  # every step
    "gen_busy_s", "gen_idle_s", "trainer_busy_s", "trainer_idle_s", "samples_per_s", "tokens_per_s",  # async
})
"""Metrics keys whose values are wall-clock measurements: they differ between two runs of one
deterministic config (a resumed run and its uninterrupted reference), every other key must not."""


def without_wall_clock(lines: list[dict]) -> list[dict]:
    """Each metrics line without the keys of :data:`WALL_CLOCK_KEYS` (key order kept)."""
    return [{k: v for k, v in line.items() if k not in WALL_CLOCK_KEYS} for line in lines]


def epoch_means(lines: list[dict], steps_per_epoch: int, keys: list[str]) -> list[dict]:
    """Mean of each of ``keys`` over consecutive blocks of ``steps_per_epoch`` training steps.

    Lines without ``step`` (evaluation-only lines) and missing or non-numeric values are skipped; a
    key with no value in a block is None there. The last block may be partial: its ``steps`` says so.
    -> one dict per epoch: ``epoch`` (from 1), ``steps`` ("first-last") and one mean per key.
    """
    steps = [line for line in lines if "step" in line]
    epochs = []
    for start in range(0, len(steps), steps_per_epoch):
        block = steps[start : start + steps_per_epoch]
        means = {}
        for key in keys:
            values = [line[key] for line in block if isinstance(line.get(key), int | float)]
            means[key] = sum(values) / len(values) if values else None
        epochs.append({"epoch": start // steps_per_epoch + 1, "steps": f"{block[0]['step']}-{block[-1]['step']}",
                       **means})
    return epochs


def mean_over_runs(runs: list[list[dict]]) -> list[dict]:
    """Line-by-line average of several runs' metrics (e.g. seeds of one recipe): ``step`` must agree
    line by line; ``flops`` is averaged, and ``heldout_pass_rate`` where every run has it on that line
    (else the line has none). Raises UserError when the runs' steps differ."""
    if len({tuple(line["step"] for line in lines) for lines in runs}) != 1:
        raise UserError("the runs to average have different metrics steps; average runs with the same "
                        "metrics steps, line by line")
    averaged = []
    for same_step in zip(*runs):
        line = {"step": same_step[0]["step"], "flops": sum(r["flops"] for r in same_step) / len(same_step)}
        if all("heldout_pass_rate" in r for r in same_step):
            line["heldout_pass_rate"] = sum(r["heldout_pass_rate"] for r in same_step) / len(same_step)
        averaged.append(line)
    return averaged
