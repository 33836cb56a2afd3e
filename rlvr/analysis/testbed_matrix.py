"""The testbed matrix's verdicts (docs/methods/testbed.md): what the matrix keeps of one finished
`rlvr run` cell, the four checks over every cell, and the table of docs/results.md.
``benchmarks/studies/testbed_matrix.py`` runs the cells and calls these.

A cell result is a dict: ``pretrain_seed``, ``rl_seed``, ``dtype``, ``wall_s`` (the whole cell), and
what :func:`cell_result` reads from the run directory.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from rlvr.analysis.trend import last_part_change
from rlvr.config import load_config
from rlvr.log import read_metrics

BASE_RANGE = (0.10, 0.35)
"""The base's held-out pass@1 must lie in this range: room to gain, and enough reward to learn from."""
RETENTION_RANGE = (0.2, 0.8)
"""The base's greedy retention accuracy must lie in this range (non-degenerate)."""


def cell_result(run: Path) -> dict:
    """What the matrix keeps of one finished `rlvr run` directory (reads eval.json, config.yaml,
    metrics.jsonl and train_summary.json): base and trained pass@1, the gain and its 95% interval,
    pass@16, the held-out curve's last-third change, retention, precision and RL wall time."""
    evaluation = json.loads((run / "eval.json").read_text())
    cfg = load_config(str(run / "config.yaml"))
    base, trained = evaluation["base"]["pass_at_k"]["1"], evaluation["trained"]["pass_at_k"]["1"]
    lo, hi = evaluation["crossover"]["base_minus_trained_ci"]["1"]
    rows = [r for r in read_metrics(run) if "heldout_pass_rate" in r]
    draws = cfg.train.eval_problems * cfg.train.eval_samples
    curve = last_part_change([r["step"] for r in rows], [r["heldout_pass_rate"] for r in rows], draws,
                             total_steps=cfg.train.steps)
    retention = {}
    for name, base_retention in evaluation["retention"]["base"].items():
        delta = evaluation["retention"].get("delta", {}).get(name)
        trained_accuracy = evaluation["retention"]["trained"][name]["accuracy"]
        retention[name] = {"base": base_retention["accuracy"], "base_ci": base_retention.get("ci"),
                           "trained": trained_accuracy,
                           **({"delta": delta["delta"], "delta_ci": delta["ci"]} if delta else {})}
    summary = json.loads((run / "train_summary.json").read_text())
    return {"base_pass1": base, "trained_pass1": trained, "gain": trained - base, "gain_ci": [-hi, -lo],
            "pass16": [evaluation["base"]["pass_at_k"].get("16"), evaluation["trained"]["pass_at_k"].get("16")],
            "curve": curve, "curve_points": [[r["step"], r["heldout_pass_rate"]] for r in rows],
            "retention": retention, "precision": cfg.model.dtype, "rl_wall_s": summary.get("wall_s"),
            "machine": evaluation.get("machine")}


def checks(cells: list[dict], min_gain: float) -> dict[str, bool]:
    """The four checks over every cell -> {what is checked: passed}: gain >= ``min_gain``, base pass@1
    in :data:`BASE_RANGE`, no held-out curve falls over its last third, base retention in
    :data:`RETENTION_RANGE`."""
    retention = [v["base"] for c in cells for v in c["retention"].values()]
    return {
        f"gain >= {min_gain:+.2f} in every cell": all(c["gain"] >= min_gain for c in cells),
        f"base pass@1 in [{BASE_RANGE[0]}, {BASE_RANGE[1]}]": all(BASE_RANGE[0] <= c["base_pass1"] <= BASE_RANGE[1]
                                                                 for c in cells),
        "held-out curve does not fall over the last third": not any(c["curve"]["falls"] for c in cells),
        f"base retention in [{RETENTION_RANGE[0]}, {RETENTION_RANGE[1]}]": bool(retention) and all(
            RETENTION_RANGE[0] <= x <= RETENTION_RANGE[1] for x in retention),
    }


def _number(x, fmt="{:.3f}") -> str:
    return "-" if x is None else fmt.format(x)


def markdown(cells: list[dict], bases: dict, min_gain: float, machine: str, command: str) -> str:
    """The matrix as the markdown of docs/results.md: one row per cell, the gain's spread, each base's
    pretraining time (``bases``: {pretrain seed: {"wall_s": ...}}), the checks, the machine and the command."""
    head = ["pretrain seed", "RL seed", "precision", "base pass@1", "trained pass@1", "gain [95% CI]",
            "last-third change [95% CI]", "retention base -> trained (delta [95% CI])", "RL s", "cell s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c in cells:
        cv = c["curve"]
        curve = "-" if cv["change"] is None else f"{cv['change']:+.3f} [{cv['lo']:+.3f}, {cv['hi']:+.3f}]"
        retention = "; ".join(f"{n} {v['base']:.3f} -> {v['trained']:.3f}"
                              + (f" ({v['delta']:+.3f} [{v['delta_ci'][0]:+.3f}, {v['delta_ci'][1]:+.3f}])"
                                 if "delta" in v else "") for n, v in c["retention"].items())
        lines.append("| " + " | ".join([
            str(c["pretrain_seed"]), str(c["rl_seed"]), c["precision"], _number(c["base_pass1"]),
            _number(c["trained_pass1"]), f"{c['gain']:+.3f} [{c['gain_ci'][0]:+.3f}, {c['gain_ci'][1]:+.3f}]", curve,
            retention, _number(c.get("rl_wall_s"), "{:.0f}"), _number(c["wall_s"], "{:.0f}")]) + " |")
    gains = [c["gain"] for c in cells]
    lines += ["", f"gain min / median / max: {min(gains):+.3f} / {statistics.median(gains):+.3f} / {max(gains):+.3f} "
              f"over {len(cells)} cells", ""]
    lines += [f"- base of pretraining seed {p}: {b['wall_s']:.0f} s to pretrain" for p, b in sorted(bases.items())]
    lines += [""] + [f"- {'PASS' if ok else 'FAIL'}: {name}" for name, ok in checks(cells, min_gain).items()]
    lines += ["", f"machine: {machine}", "", f"command: `{command}`", ""]
    return "\n".join(lines)
