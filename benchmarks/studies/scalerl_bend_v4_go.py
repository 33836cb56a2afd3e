"""Apply scalerl_bend_v4's declared go rule (its protocol, "Go"; written and tested before the pilot's
curves were read) to the pilot's two curves: do the claim parts (2-6) run? With ``--claim-runs``,
report the declared premises (tests c and d) of every finished claim run instead.

The rule: the pilot (pretraining seed 2, RL seed 1) trains the recipe (``pilot_ref``) and the GRPO loss
(``pilot_grpo``) for the claims' 640 steps. Parts 2-6 run only if both curves pass

- (a) *bent*: the sigmoid fit on the whole curve (the claims' fit: R0 fixed to the first point, 200
  case-bootstrap replicates) is bent (docs/methods/scaling_curves.md);
- (b) *no fall at the end*: the mean of the last 5 evaluations is at least the largest mean of any 5
  consecutive evaluations minus 0.03 (scalerl_bend_v2's test, :func:`scalerl_bend_v2_go.fall`);
- (c) *no dip*: no mean of 5 consecutive evaluations lies more than 0.05 below the largest such mean
  before it (the deepest drawdown; scalerl_bend_v3's pilot passed (a) and (b) after dipping by 0.31 and
  recovering above its earlier best, which a test measured from the overall best would also miss);
- (d) *the pool holds*: at the run's last step No-Positive-Resampling has retired at most 90% of the
  34,000 training problems (the run's ``retired_prompts`` metric, from its ``metrics.jsonl``).

The length's ratio to the larger fitted C_mid is reported (below 10x: a deviation, not a stop), and a
fit whose A sits at its bound (1.0) is named.

    python benchmarks/studies/scalerl_bend_v4_go.py OUT_DIR [--json go.json] [--claim-runs]

OUT_DIR is the experiment's output folder (``rlvr reproduce scalerl_bend_v4 --out OUT_DIR``). A missing
pilot curve or metrics log is an error naming it (exit 2). Exit 0 whether the decision is go or stop.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # scalerl_bend_v2_go: the tests (a) and (b)
from scalerl_bend_v2_go import AIM, WINDOW, GoError, ratio_line  # noqa: E402
from scalerl_bend_v2_go import judge as judge_v2  # noqa: E402

from rlvr.errors import UserError  # noqa: E402
from rlvr.experiments.curve_measures import fit_run  # noqa: E402
from rlvr.experiments.models import model_id  # noqa: E402
from rlvr.experiments.runner import load_curve, seeds_of  # noqa: E402
from rlvr.experiments.spec import load  # noqa: E402
from rlvr.paths import iter_jsonl  # noqa: E402

EXPERIMENT = "scalerl_bend_v4"
PILOTS = (("c_pilot_ref", "pilot_ref"), ("c_pilot_grpo", "pilot_grpo"))
ARMS = (("c_scalerl", "scalerl"), ("c_grpo", "grpo"), ("c_dapo", "dapo"))
DIP = 0.05
POOL, HOLD = 34_000, 0.9  # the task's training problems (3-4 operands, pool 40,000); the retired share allowed


def dip(R: np.ndarray, window: int = WINDOW) -> tuple[float, float]:
    """R (N,) -> (peak, depth): the deepest drawdown of the means of ``window`` consecutive evaluations,
    i.e. the largest (earlier maximum - later mean) (>= 0; 0 for a curve whose means never fall), and
    the earlier maximum it fell from."""
    if R.size < window:
        raise GoError(f"only {R.size} evaluations; the no-dip test needs at least {window}")
    means = np.convolve(R, np.ones(window) / window, mode="valid")
    peaks = np.maximum.accumulate(means)
    i = int((peaks - means).argmax())
    return float(peaks[i]), float(peaks[i] - means[i])


def retired_at_end(run_dir: Path) -> tuple[int, int]:
    """(step, retired prompts) of the last row of ``run_dir/metrics.jsonl`` that carries ``retired_prompts``."""
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        raise GoError(f"no metrics log {path}: the pool test reads the run's retired_prompts there")
    last = None
    for _, row in iter_jsonl(path):
        if "retired_prompts" in row:
            last = (int(row["step"]), int(row["retired_prompts"]))
    if last is None:
        raise GoError(f"{path} has no retired_prompts: was No-Positive-Resampling on?")
    return last


def premises(R: np.ndarray, retired: int) -> dict:
    """Tests (c) and (d) of one run: R (N,) its curve, ``retired`` the prompts retired at its end."""
    peak, depth = dip(R)
    return {"dip_from": peak, "dip": depth, "dips": bool(depth > DIP), "retired": retired,
            "retired_frac": retired / POOL, "drained": bool(retired > HOLD * POOL)}


def judge(C: np.ndarray, R: np.ndarray, fit, boot, retired: int) -> dict:
    """One pilot curve (C (N,), R (N,)), its fit with replicates and the prompts retired at its end ->
    the four tests and the numbers behind them."""
    out = {**judge_v2(C, R, fit, boot), **premises(R, retired)}
    out["A_at_bound"] = bool(fit.a_at_bound)  # A at the fit's bound 1.0 (rlvr.analysis.curves)
    out["passes"] = bool(out["passes"] and not out["dips"] and not out["drained"])
    return out


def decide(curves: dict[str, dict]) -> dict:
    """{name: judge(...)} of both pilots -> {"go", "ratio" (the length over the larger C_mid; None when a
    fit is not bent), "below_aim", "curves"}."""
    ratio = None
    if all(c["bent"] for c in curves.values()):
        ratio = min(c["C_last"] for c in curves.values()) / max(c["C_mid"] for c in curves.values())
    return {"go": all(c["passes"] for c in curves.values()), "ratio": ratio,
            "below_aim": None if ratio is None else bool(ratio < AIM), "curves": curves}


def run_dir(out: Path, model: str, seed: int | None) -> Path:
    return out / "models" / model_id(model, seed) / "run"


def pilot_report(exp, out: Path) -> dict:
    curves = {}
    for ev, model in PILOTS:
        C, R = load_curve(out, exp.evaluations[ev], model, None)
        curves[model] = judge(C, R, *fit_run(C, R, None), retired_at_end(run_dir(out, model, None))[1])
    return decide(curves)


def claim_runs(exp, out: Path) -> dict:
    """{run id: premises(...) or {"missing": why}} of every claim run (each arm, RL seed, pretraining seed)."""
    runs: dict = {}
    for ev, arm in ARMS:
        names = [arm] + [f"{arm}@p{p}" for p in range(1, exp.pretrain_seeds)]
        for name in names:
            for seed in seeds_of(exp, name, exp.seeds):
                rid = model_id(name, seed)
                try:
                    _, R = load_curve(out, exp.evaluations[ev], name, seed)
                    runs[rid] = premises(R, retired_at_end(run_dir(out, name, seed))[1])
                except (GoError, UserError) as e:
                    runs[rid] = {"missing": str(e)}
    return runs


def print_pilots(report: dict) -> None:
    for name, c in report["curves"].items():
        bound = " (A at its bound 1.0: no measured ceiling)" if c["A_at_bound"] else ""
        print(f"  {name}: A {c['A']:.3f} [{c['A_interval'][0]:.3f}, {c['A_interval'][1]:.3f}]{bound}, B {c['B']:.2f}, "
              f"C_mid {c['C_mid']:.3g} samples ({c['C_last'] / c['C_mid']:.1f}x to the end); "
              f"{'bent' if c['bent'] else 'NOT bent: ' + c['why_not_bent']}")
        print(f"    (b) best 5 {c['best5']:.3f}, last 5 {c['last5']:.3f}, drop {c['drop']:+.3f} "
              f"({'FALLS' if c['falls'] else 'no fall'}, limit 0.03); (c) deepest dip {c['dip']:.3f} "
              f"({'DIPS' if c['dips'] else 'no dip'}, limit {DIP}); (d) retired {c['retired']:,} of {POOL:,} "
              f"({c['retired_frac']:.0%}; {'DRAINED' if c['drained'] else 'holds'}, limit {HOLD:.0%})")
    print(ratio_line(report))
    print("go: parts 2-6 run" if report["go"] else
          "stop: a pilot curve failed a test; no claim part runs, every claim reads not measured")


def print_claim_runs(runs: dict) -> None:
    failing = 0
    for rid, p in runs.items():
        if "missing" in p:
            print(f"  {rid}: not run ({p['missing']})")
            continue
        bad = [t for t, on in (("DIPS", p["dips"]), ("DRAINED", p["drained"])) if on]
        failing += bool(bad)
        print(f"  {rid}: (c) deepest dip {p['dip']:.3f}; (d) retired {p['retired']:,} "
              f"({p['retired_frac']:.0%}){': ' + ', '.join(bad) if bad else ''}")
    done = sum("missing" not in p for p in runs.values())
    print(f"{done} of {len(runs)} claim runs finished; {failing} fail a premise (named above)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--claim-runs", action="store_true", help="the premises of every claim run, not the pilot")
    args = parser.parse_args(argv)
    try:
        exp = load(EXPERIMENT)
        report = claim_runs(exp, args.out) if args.claim_runs else pilot_report(exp, args.out)
    except (GoError, UserError) as e:
        print(f"scalerl_bend_v4_go: {e}", file=sys.stderr)
        return 2
    (print_claim_runs if args.claim_runs else print_pilots)(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
