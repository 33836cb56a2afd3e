"""A ``kind: dynamics`` evaluation cell: the per-step training series of one RL model, read from its
run's ``metrics.jsonl`` (nothing is sampled): sampled-token entropy, its observed change, the
predicted first-order change of the four entropy-dynamics cells (docs/methods/losses.md, "The
entropy-dynamics view"), pass rate and learning rate; for an intrinsic-reward run its reward
accuracy and the proxy's AUROC for correctness inside the groups (``proxy_truth_auroc``). ``stats.json`` =
{"kind": "dynamics", "series": {key: [one value per step, None where the step did not log it]}}.
"""

from __future__ import annotations

from pathlib import Path

from rlvr.algo.diagnostics import CELLS
from rlvr.errors import UserError
from rlvr.experiments.cells import finish_cell, open_cell
from rlvr.paths import iter_jsonl

SERIES = ("step", "entropy", "entropy_obs_change", "dH_total", *(f"dH_{c}" for c in CELLS),
          *(f"token_share_{c}" for c in CELLS), "pass_rate", "lr", "heldout_pass_rate", "samples", "flops",
          "reward", "reward_accuracy", "proxy_truth_auroc", "dH_obs_total", *(f"dH_obs_{c}" for c in CELLS),
          "probe_entropy_before", "probe_entropy_after", "probe_entropy_change")


def read_series(metrics: Path) -> dict[str, list]:
    """{key: [value per step]} of :data:`SERIES` from a run's metrics.jsonl: every logged step, the
    rows of a step merged (a later value wins, so a resumed run's repeated steps count once; a step
    without a gradient logs no dH, and has None there)."""
    if not metrics.exists():
        raise UserError(f"{metrics} is missing: a dynamics evaluation needs an RL run's metrics")
    by_step: dict[int, dict] = {}
    for _, row in iter_jsonl(metrics):
        if "step" in row and any(k in row for k in SERIES[1:]):
            by_step.setdefault(int(row["step"]), {}).update(row)
    steps = sorted(by_step)
    return {k: [by_step[s].get(k) for s in steps] for k in SERIES}


def evaluate_dynamics(run_dir: str | Path, out: Path, key: str = "") -> dict:
    """Write ``out/stats.json`` from ``run_dir/metrics.jsonl`` -> the stats (cached under ``key``)."""
    if (cached := open_cell(out, key)) is not None:
        return cached
    return finish_cell(out, {"kind": "dynamics", "series": read_series(Path(run_dir) / "metrics.jsonl")})
