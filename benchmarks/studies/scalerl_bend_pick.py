"""Apply scalerl_bend's declared pilot rule (its protocol, "Pilot"; written before any of its runs) to
the pilot's curves: which higher learning rate, if any, is the designed crossing arm (parts 12-14 for
lr 3e-4, 15-17 for lr 1e-3).

The rule: a candidate (the recipe at lr 3e-4, ``pilot_lr3e4``; at lr 1e-3, ``pilot_lr1e3``) *crosses*
the reference (the recipe at lr 1e-4, ``pilot_ref``; all three on pretraining seed 2, RL seed 0) when it
leads over the first 25% of compute (the mean of its held-out evaluations with samples <= 0.25 x the
run's last, the first evaluation excluded) and ends lower (the mean of its last 5 evaluations), both
gaps above twice the seed sd: the sd over the 3 RL seeds of the recipe on pretraining seed 0
(``scalerl-s0``, ``-s1``, ``-s2``: parts 1, 4, 7) of the same early mean and of the same final. Of the
candidates that cross, the one with the larger smaller gap is picked (equal: the first declared); if
none crosses, no crossing arm is trained.

    python benchmarks/studies/scalerl_bend_pick.py OUT_DIR [--json pick.json]

OUT_DIR is the experiment's output folder (``rlvr reproduce scalerl_bend --out OUT_DIR``). A missing
curve is an error naming it (exit 2). Prints each candidate's gaps against their thresholds and the
pick; ``--json`` writes the same.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from rlvr.errors import UserError
from rlvr.experiments.runner import load_curve
from rlvr.experiments.spec import load

FRACTION, LAST = 0.25, 5
CANDIDATES = (("lr3e4", "c_pilot_lr3e4", "pilot_lr3e4", "12-14"), ("lr1e3", "c_pilot_lr1e3", "pilot_lr1e3", "15-17"))
REFERENCE = ("c_pilot_ref", "pilot_ref")
SPREAD = ("c_scalerl", "scalerl", (0, 1, 2))


class PickError(Exception):
    """Input the rule cannot be applied to; the message names it."""


def early_mean(C: np.ndarray, R: np.ndarray, fraction: float = FRACTION) -> float:
    """Mean of R (N,) over the evaluations with C <= fraction x C[-1], the first excluded."""
    keep = (C <= fraction * C[-1]) & (np.arange(C.size) > 0)
    if not keep.any():
        raise PickError(f"no evaluation after the first within {fraction:.0%} of compute")
    return float(R[keep].mean())


def final_mean(R: np.ndarray, last: int = LAST) -> float:
    """Mean of the last ``last`` evaluations of R (N,)."""
    return float(R[-last:].mean())


def decide(ref: tuple, candidates: dict[str, tuple], spread: list[tuple]) -> dict:
    """The rule on curves (C (N,), R (N,)): ``ref``, ``candidates`` {name: curve} in declared order,
    ``spread`` the recipe's curves over RL seeds -> {"sd_early", "sd_final", "candidates": [{"name",
    "early_gap" (candidate - reference), "final_gap" (reference - candidate), "crosses", "smaller"}],
    "pick": name or None}."""
    if len(spread) < 2:
        raise PickError(f"the seed sd needs at least 2 of the recipe's runs, got {len(spread)}")
    sd_early = float(np.std([early_mean(*c) for c in spread], ddof=1))
    sd_final = float(np.std([final_mean(c[1]) for c in spread], ddof=1))
    rows = []
    for name, (C, R) in candidates.items():
        early = early_mean(C, R) - early_mean(*ref)
        final = final_mean(ref[1]) - final_mean(R)
        crosses = bool(early > 2 * sd_early and final > 2 * sd_final)
        rows.append({"name": name, "early_gap": early, "final_gap": final, "crosses": crosses,
                     "smaller": min(early, final)})
    crossing = [r for r in rows if r["crosses"]]
    pick = max(crossing, key=lambda r: r["smaller"])["name"] if crossing else None  # max keeps the first of ties
    return {"sd_early": sd_early, "sd_final": sd_final, "threshold_early": 2 * sd_early,
            "threshold_final": 2 * sd_final, "candidates": rows, "pick": pick}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    exp = load("scalerl_bend")
    try:
        ref = load_curve(args.out, exp.evaluations[REFERENCE[0]], REFERENCE[1], None)
        cands = {name: load_curve(args.out, exp.evaluations[ev], model, None) for name, ev, model, _ in CANDIDATES}
        spread = [load_curve(args.out, exp.evaluations[SPREAD[0]], SPREAD[1], s) for s in SPREAD[2]]
        report = decide(ref, cands, spread)
    except (PickError, UserError) as e:
        print(f"scalerl_bend_pick: {e}", file=sys.stderr)
        return 2
    parts = {name: p for name, _, _, p in CANDIDATES}
    print(f"seed sd (recipe, pretraining seed 0, RL seeds 0-2): early {report['sd_early']:.4f}, "
          f"final {report['sd_final']:.4f}; thresholds 2 sd: {report['threshold_early']:.4f}, "
          f"{report['threshold_final']:.4f}")
    for r in report["candidates"]:
        print(f"  {r['name']}: leads early by {r['early_gap']:+.4f}, ends lower by {r['final_gap']:+.4f} -> "
              f"{'crosses' if r['crosses'] else 'does not cross'}")
    report["parts"] = parts.get(report["pick"])
    print(f"pick: {report['pick']} (train parts {report['parts']})" if report["pick"]
          else "pick: none crosses: no crossing arm is trained; both claims read not measured")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
