"""Extrapolation check of the ScaleRL curve fit on real runs: for each run length L, fit
`rlvr fit` on the first half of the FLOPs of the run's first L steps and predict the held-out
pass rate at the L-step FLOPs; compare with the observed mean of the last 3 evaluations.

With a constant learning rate after warm-up, the first L steps of a run are themselves a complete
L-step run, so one long run gives one check per length. Prints a markdown table (the one in
docs/curves_results.md) and writes the truncated metrics, the fit JSON files and, for the longest
length, the plots under --out.

    python benchmarks/studies/first_half_fit.py RUN_DIR_OR_METRICS [...] --lengths 480,960,1440 [--min-frac 0.05]
        [--mean NAME]

--mean NAME also checks the seed average: the runs' metrics averaged line by line (same steps;
cumulative FLOPs and held-out pass rate averaged: :func:`rlvr.analysis.metric_series.mean_over_runs`),
checked as one more run called NAME.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from rlvr.analysis.metric_series import mean_over_runs
from rlvr.errors import UserError
from rlvr.log import read_metrics
from rlvr.metric_names import flat
from rlvr.paths import read_jsonl


def _name(run: Path) -> str:
    return run.name if run.is_dir() else run.name.split(".")[0]


def read_rows(run: Path) -> list[dict]:
    """The metrics lines of a run directory or of a metrics file (this script's truncated ones)."""
    return read_metrics(run) if run.is_dir() else [flat(row) for row in read_jsonl(run)]


def check(name: str, all_rows: list[dict], length: int, out: Path, min_frac: float, plot: bool) -> dict | None:
    """One first-half fit of the first ``length`` steps of a run's metrics ``all_rows``; None if
    the run is shorter."""
    rows = [r for r in all_rows if r["step"] <= length]
    if not rows or rows[-1]["step"] < length:
        return None
    run_name, name = name, f"{name}_{length}"
    metrics = out / f"{name}.metrics.jsonl"
    metrics.write_text("".join(json.dumps(r) + "\n" for r in rows))
    final = rows[-1]["flops"]
    evals = [r["heldout_pass_rate"] for r in rows if "heldout_pass_rate" in r]
    fit_json = out / f"fit_{name}_min{min_frac:g}.json"
    cmd = [sys.executable, "-c", "from rlvr.cli import main; raise SystemExit(main())", "fit", str(metrics),
           "--fit-until", repr(final / 2), "--predict-at", repr(final), "--json", str(fit_json)]
    if min_frac:
        cmd += ["--min-compute", repr(min_frac * final)]
    if plot:
        cmd += ["--plot", str(out / f"curves_{name}_min{min_frac:g}.png")]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    fit = json.loads(fit_json.read_text())["runs"][0]
    return {"run": run_name, "steps": length, "fit_until": final / 2, **fit, "observed3": sum(evals[-3:]) / 3}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--lengths", default="480,720,960,1200,1440", help="comma-separated run lengths in steps")
    ap.add_argument("--min-frac", type=float, default=0.0, help="drop points below this share of the final FLOPs")
    ap.add_argument("--out", type=Path, default=Path("first_half_fit"))
    ap.add_argument("--mean", metavar="NAME", default="", help="also check the runs' line-by-line average")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    lengths = [int(x) for x in args.lengths.split(",")]
    print("| recipe | steps | fit on C <= | A | B | C_mid | bent | predicted [95% PI] "
          "| observed final (last point) | error (points) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    runs = {_name(run): read_rows(run) for run in args.runs}
    if args.mean:
        try:
            runs[args.mean] = mean_over_runs(list(runs.values()))
        except UserError as e:
            sys.exit(f"error: --mean: {e}")
    results = []
    for name, rows in runs.items():
        for length in lengths:
            r = check(name, rows, length, args.out, args.min_frac, plot=length == lengths[-1])
            if r is None:
                continue
            p = r["prediction"]
            err = 100 * (p["value"] - r["observed3"])
            results.append({**r, "error_points": err})
            print(f"| {r['run']} | {length} | {r['fit_until']:.3g} | {r['A']:.3f} | {r['B']:.2f} | {r['C_mid']:.3g} "
                  f"| {'yes' if r['bent'] else 'no'} | {p['value']:.3f} [{p['low']:.3f}, {p['high']:.3f}] "
                  f"| {r['observed3']:.3f} ({p['observed']:.3f}) | {err:+.1f} |")
    within = sum(abs(r["error_points"]) <= 3 for r in results)
    print(f"\nwithin 3 points: {within} of {len(results)}; bent: {sum(r['bent'] for r in results)} of {len(results)}")
    (args.out / "first_half_fit.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
