"""Apply scalerl_bend_v2's declared go rule (its protocol, "Go"; written before the pilot's curves were
read) to the pilot's two curves: do the claim parts (2-10) run?

The rule: the pilot (pretraining seed 2, RL seed 0) trains the recipe (``pilot_ref``) and the GRPO loss
(``pilot_grpo``). Parts 2-10 run only if both curves pass (a) *bent*: the sigmoid fit on the whole
curve, the claims' own fit (R0 fixed to the first point, 200 case-bootstrap replicates, bent as in
docs/methods/scaling_curves.md), is bent; and (b) *no fall*: the mean of the last 5 evaluations is at
least the largest mean of any 5 consecutive evaluations minus 0.03. The run's length over the larger
fitted C_mid is reported (where both fits bent; otherwise it is not defined); below 10x it is a
deviation the page states, not a stop.

    python benchmarks/studies/scalerl_bend_v2_go.py OUT_DIR [--experiment scalerl_bend_v3] [--json go.json]

OUT_DIR is the experiment's output folder (``rlvr reproduce scalerl_bend_v2 --out OUT_DIR``);
``--experiment`` names a later declaration that adopted the same rule and pilot names (scalerl_bend_v3). A missing
curve is an error naming it (exit 2). Prints each curve's tests (with A's bootstrap interval) and the
decision; ``--json`` writes the same. Exit 0 whether the decision is go or stop.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from rlvr.errors import UserError
from rlvr.experiments.curve_measures import fit_run
from rlvr.experiments.runner import load_curve
from rlvr.experiments.spec import load

WINDOW, FALL = 5, 0.03
PILOTS = (("c_pilot_ref", "pilot_ref"), ("c_pilot_grpo", "pilot_grpo"))
AIM = 10.0  # the aim: the length at least 10x the fitted C_mid


class GoError(Exception):
    """Input the rule cannot be applied to; the message names it."""


def fall(R: np.ndarray, window: int = WINDOW) -> tuple[float, float, float]:
    """R (N,) -> (best, last, drop): the largest mean of ``window`` consecutive evaluations, the mean of
    the last ``window``, and best - last (>= 0)."""
    if R.size < window:
        raise GoError(f"only {R.size} evaluations; the no-fall test needs at least {window}")
    means = np.convolve(R, np.ones(window) / window, mode="valid")
    best, last = float(means.max()), float(means[-1])
    return best, last, best - last


def judge(C: np.ndarray, R: np.ndarray, fit, boot) -> dict:
    """One pilot curve (C (N,), R (N,)) and its fit with replicates -> the two tests and the numbers
    behind them."""
    best, last, drop = fall(R)
    A_lo, A_hi = boot.ci["A"] if boot is not None else (float("nan"), float("nan"))
    return {"bent": bool(fit.bent), "why_not_bent": "" if fit.bent else str(getattr(fit, "message", "")),
            "A": float(fit.A), "A_interval": [float(A_lo), float(A_hi)], "B": float(fit.B),
            "C_mid": float(fit.C_mid), "C_last": float(C[-1]), "best5": best, "last5": last, "drop": drop,
            "falls": bool(drop > FALL), "passes": bool(fit.bent and drop <= FALL)}


def decide(curves: dict[str, dict]) -> dict:
    """{name: judge(...)} of both pilots -> {"go", "ratio" (the length over the larger C_mid; None when a
    fit is not bent: its C_mid is then no midpoint of the data), "below_aim" (None likewise), "curves"}."""
    ratio = None
    if all(c["bent"] for c in curves.values()):
        ratio = min(c["C_last"] for c in curves.values()) / max(c["C_mid"] for c in curves.values())
    return {"go": all(c["passes"] for c in curves.values()), "ratio": ratio,
            "below_aim": None if ratio is None else bool(ratio < AIM), "curves": curves}


def ratio_line(report: dict) -> str:
    """The printed line of :func:`decide`'s length over the larger C_mid."""
    if report["ratio"] is None:
        return "length / larger C_mid: not defined (a fit did not bend, so its C_mid is no midpoint of the data)"
    return (f"length / larger C_mid: {report['ratio']:.1f}x"
            + (f" (below the {AIM:.0f}x aim: a deviation the page states)" if report["below_aim"] else ""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--experiment", default="scalerl_bend_v2",
                        help="the declaration whose pilot to judge (default scalerl_bend_v2)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    try:
        exp = load(args.experiment)
        lacking = [ev for ev, _ in PILOTS if ev not in exp.evaluations]
        if lacking:
            raise GoError(f"{args.experiment} declares no evaluation {lacking[0]!r}: not a declaration with this pilot")
        curves = {}
        for ev, model in PILOTS:
            C, R = load_curve(args.out, exp.evaluations[ev], model, None)
            curves[model] = judge(C, R, *fit_run(C, R, None))
        report = decide(curves)
    except (GoError, UserError) as e:
        print(f"scalerl_bend_v2_go: {e}", file=sys.stderr)
        return 2
    for name, c in report["curves"].items():
        print(f"  {name}: A {c['A']:.3f} [{c['A_interval'][0]:.3f}, {c['A_interval'][1]:.3f}], B {c['B']:.2f}, "
              f"C_mid {c['C_mid']:.3g} samples ({c['C_last'] / c['C_mid']:.1f}x to the end); "
              f"{'bent' if c['bent'] else 'NOT bent: ' + c['why_not_bent']}; best 5 {c['best5']:.3f}, last 5 "
              f"{c['last5']:.3f}, drop {c['drop']:+.3f} ({'FALLS' if c['falls'] else 'no fall'}, limit {FALL})")
    print(ratio_line(report))
    print("go: parts 2-10 run" if report["go"] else
          "stop: a pilot curve failed a test; no claim part runs, every claim reads not measured")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
