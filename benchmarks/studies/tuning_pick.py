"""Apply a declared tuning rule to the validation cells of a reproduction (``rlvr reproduce NAME --part N``
with an evaluation on an offset block and ``milestones: true``): each candidate's pass@1 at every kept
checkpoint minus the base's, its peak gain and step, and the pick of each group.

The rule (urlvr_v2's protocol, docs/reproductions/urlvr_v2): a group's pick is the candidate whose peak
validation gain (its best pass@1 over the kept checkpoints minus the base's) is largest; gains within
``--tie`` of the largest go to the candidate listed first (the smaller lr, when candidates are listed in
increasing lr); if no candidate's peak gain is above 0, the first.

    python benchmarks/studies/tuning_pick.py OUT_DIR --base base \
        --group tl=tune_tl_1,tune_tl_2,tune_tl_3 --group top2=tune_top2_1,tune_top2_2,tune_top2_3 [--tie 0.005]

Prints one row per candidate (pass@1 of each checkpoint, peak gain, peak step) and the picks; ``--json``
writes the same.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path


def pass1(stats_file: Path) -> float:
    """Mean share of correct samples of one cell (``correct``: per-problem counts out of ``n``)."""
    stats = json.loads(stats_file.read_text())
    return sum(stats["correct"]) / (stats["n"] * len(stats["correct"]))


def checkpoints(evals: Path, model: str) -> list[tuple[int | str, float]]:
    """(step, pass@1) of ``model``'s kept checkpoints (``model@step_NNNNNN``) in step order, then
    ("final", pass@1) of the model itself, from every evaluation folder under ``evals``."""
    found: dict[int, float] = {}
    final: list[tuple[int | str, float]] = []
    for cell in sorted(evals.glob(f"*/{model}*/stats.json")):
        name = cell.parent.name
        match = re.fullmatch(re.escape(model) + r"@step_(\d+)", name)
        if name == model:
            final = [("final", pass1(cell))]
        elif match:
            found[int(match.group(1))] = pass1(cell)
    return sorted(found.items()) + final


def pick(gains: list[float], tie: float) -> int:
    """Index of the candidate the rule picks from their peak gains (in listed order)."""
    best = max(gains)
    if best <= 0:
        return 0
    return next(i for i, gain in enumerate(gains) if gain >= best - tie)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--base", default="base")
    parser.add_argument("--group", action="append", required=True, help="NAME=model1,model2,...")
    parser.add_argument("--tie", type=float, default=0.005)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    evals = args.out / "evals"
    base_cells = list(evals.glob(f"*/{args.base}/stats.json"))
    if len(base_cells) != 1:
        sys.exit(f"expected one cell of {args.base!r} under {evals}, found {len(base_cells)}")
    base = pass1(base_cells[0])
    print(f"base pass@1 {base:.4f}")
    report: dict = {"base": base, "groups": {}}
    for spec in args.group:
        group, _, models = spec.partition("=")
        rows = []
        for model in models.split(","):
            curve = checkpoints(evals, model)
            if not curve:
                sys.exit(f"no cells of {model!r} under {evals}")
            peak_step, value = max(curve, key=lambda point: point[1])  # the earliest of equal peaks
            shown = " ".join(f"{v:.3f}" for _, v in curve)
            rows.append({"model": model, "curve": [v for _, v in curve], "peak_gain": value - base,
                         "peak_step": peak_step})
            print(f"{group:8s} {model:14s} peak gain {value - base:+.4f} at {peak_step}: {shown}")
        chosen = pick([row["peak_gain"] for row in rows], args.tie)
        print(f"{group:8s} pick: {rows[chosen]['model']}")
        report["groups"][group] = {"rows": rows, "pick": rows[chosen]["model"]}
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
