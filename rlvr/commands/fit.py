"""``rlvr fit``: fit ScaleRL sigmoidal compute-performance curves to runs and compare them."""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass
from pathlib import Path

from rlvr.console import print_table
from rlvr.paths import atomic_write

HELP = "Fit sigmoidal compute-performance curves (ScaleRL) to runs; compare ceilings A and efficiency B."
EPILOG = """examples:
  rlvr fit runs/cispo runs/dapo                      # fit both, rank by A and by B
  rlvr fit runs/cispo --x samples --min-compute 2e4  # compute = completions; drop the early part
  rlvr fit runs/cispo --fit-until 5e18 --plot fit.png  # fit on the first part, extrapolate the rest
  rlvr fit curve.csv --predict-at 1e20 --json fit.json  # any framework: CSV with compute,pass_rate
  rlvr fit trl_run/runs/ verl_history.csv              # TensorBoard events, W&B history CSV (TRL, verl)
  rlvr fit runs/s0 runs/s1 runs/s2 --r0 shared         # runs from one base: one R0 fitted for all
"""

A_NOISE = 0.02  # paper (2510.13786): repeated runs put A within about +-0.02
AT_RTOL = 1e-3  # --predict-at matches a measured compute within this relative distance


@dataclass
class _RunResult:
    name: str
    C: object  # (N,) np.ndarray, all measured compute values
    R: object  # (N,) np.ndarray
    used: object  # (N,) bool, points the fit saw
    fit: object  # CurveFit
    boot: object  # CurveBootstrap | None
    at: float
    value: float
    low: float
    high: float
    observed: float | None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="RUN_DIR_OR_FILE",
                        help="rlvr run directories, CSV/JSONL files with columns compute,pass_rate, "
                             "W&B run-history CSV exports, or TensorBoard log folders / event files")
    parser.add_argument("--x", choices=["flops", "samples", "tokens", "gpu_hours", "wall"], default="flops",
                        help="compute axis for run directories and histories (wall = seconds; default flops, "
                             "which falls back to tokens for histories without FLOPs)")
    parser.add_argument("--source", choices=["auto", "rlvr", "trl", "verl", "prime-rl", "nemo-rl"], default="auto",
                        help="whose key names a W&B CSV / TensorBoard history uses (default: judged by the keys)")
    parser.add_argument("--y", default=None, metavar="KEY",
                        help="the held-out pass-rate key of a history (default: from the framework's key map)")
    parser.add_argument("--fit-until", type=float, default=None, metavar="C",
                        help="fit only points with compute <= C; later points are held out")
    parser.add_argument("--predict-at", type=float, default=None, metavar="C",
                        help="compute at which to predict (default: the last observed compute)")
    parser.add_argument("--min-compute", type=float, default=0.0, metavar="C",
                        help="drop the initial low-compute part: fit only points with compute > C")
    parser.add_argument("--r0", choices=["fixed", "free", "shared"], default="fixed",
                        help="R0 fixed to the first measured pass rate (default), fitted per run, or fitted "
                             "once for all the runs (runs that start from the same model)")
    parser.add_argument("--n-boot", type=int, default=200,
                        metavar="N", help="bootstrap replicates for intervals (0 = none; default 200)")
    parser.add_argument("--seed", type=int, default=0, metavar="N", help="bootstrap seed (default 0)")
    parser.add_argument("--max-a-se", type=float, default=0.03, metavar="SE",
                        help="report not-bent when the standard error of A exceeds this (default 0.03)")
    parser.add_argument("--json", type=Path, default=None, metavar="FILE", help="write results as JSON")
    parser.add_argument("--plot", type=Path, default=None, metavar="FILE", help="write a PNG plot")


def _load(path: str, args: argparse.Namespace):
    """-> (name, C (N,), R (N,), used (N,) bool: the points the fit sees)."""
    import numpy as np

    from rlvr.analysis.curve_io import load_run_curve

    name, C, R = load_run_curve(path, x=args.x, framework=getattr(args, "source", "auto"),
                                y_key=getattr(args, "y", None))
    until = np.inf if args.fit_until is None else args.fit_until
    return name, C, R, (C > max(args.min_compute, 0.0)) & (C <= until)


def _fit_one(path: str, args: argparse.Namespace, shared_r0: float | None = None) -> _RunResult:
    import numpy as np

    from rlvr.analysis.curves import fit_with_bootstrap, predict
    from rlvr.errors import UserError

    name, C, R, used = _load(path, args)
    R0 = float(R[0]) if args.r0 == "fixed" else shared_r0
    try:
        fit, boot = fit_with_bootstrap(C[used], R[used], R0=R0, n_boot=args.n_boot, seed=args.seed,
                                       max_a_se=args.max_a_se)
    except UserError as e:
        raise UserError(f"{path}: {e}") from None
    at = float(C[-1]) if args.predict_at is None else args.predict_at
    value, low, high = predict(fit, at, boot)
    # the measured point at `at`: within a relative AT_RTOL, so a value copied from the printed table
    # (3 significant digits) or a half-compute computed by hand still finds it; the nearest one wins
    near = int(np.argmin(np.abs(C - at)))
    observed = float(R[near]) if abs(C[near] - at) <= AT_RTOL * abs(at) else None
    return _RunResult(name, C, R, used, fit, boot, at, value, low, high, observed)


def _num(v: float | None) -> float | None:
    return None if v is None or not math.isfinite(v) else float(v)


def _to_json(results: list[_RunResult]) -> dict:
    runs = []
    for r in results:
        f = r.fit
        runs.append({
            "name": r.name, "A": _num(f.A), "B": _num(f.B), "C_mid": _num(f.C_mid), "R0": _num(f.R0),
            "rmse": _num(f.rmse), "bent": bool(f.bent), "a_at_bound": bool(f.a_at_bound),
            "prediction": {"at": r.at, "value": _num(r.value), "low": _num(r.low), "high": _num(r.high),
                           "observed": _num(r.observed)},
        })
    return {"runs": runs}


TABLE_HEADERS = ["run", "A", "A 95% CI", "B", "C_mid", "R0", "rmse", "bent", "predict at", "value [interval]",
                 "observed"]


def _table_rows(results: list[_RunResult]) -> list[list[str]]:
    """One row per run, whole run names (runs of one day differ only at the end)."""
    rows = []
    for r in results:
        f = r.fit
        ci = r.boot.ci["A"] if r.boot is not None else (math.nan, math.nan)
        rows.append([r.name, f"{f.A:.3f}", f"[{ci[0]:.3f}, {ci[1]:.3f}]", f"{f.B:.2f}", f"{f.C_mid:.3g}",
                     f"{f.R0:.3f}", f"{f.rmse:.4f}", "yes" if f.bent else "NO", f"{r.at:.3g}",
                     f"{r.value:.3f} [{r.low:.3f}, {r.high:.3f}]", "-" if r.observed is None else f"{r.observed:.3f}"])
    return rows


def _caveat(fit) -> str:
    """What a ranking says beside a fit whose A is not a measured ceiling."""
    return ", not bent" if not fit.bent else ", A at its bound" if fit.a_at_bound else ""


def _ranking(results: list[_RunResult], key: str) -> str:
    order = sorted(results, key=lambda r: -getattr(r.fit, key))
    parts = [f"{r.name} ({getattr(r.fit, key):.3f}{_caveat(r.fit)})" for r in order]
    return f"by {key}: " + " > ".join(parts)


def _ranking_lines(results: list[_RunResult]) -> list[str]:
    lines = [_ranking(results, "A") + "   [ceiling]", _ranking(results, "B") + "   [efficiency exponent]"]
    As = sorted(r.fit.A for r in results)
    if any(b - a < A_NOISE for a, b in zip(As, As[1:])):
        lines.append(f"note: some ceilings differ by less than {A_NOISE}: within run-to-run noise "
                     "(2510.13786), not a difference")
    return lines


def run(args: argparse.Namespace) -> int:
    from rlvr.commands._common import check_output, require_path
    from rlvr.errors import UserError

    for p in args.paths:
        require_path(p, "run", "pass an rlvr run directory or a CSV/JSONL file with columns compute,pass_rate")
    for flag, path in (("--json", args.json), ("--plot", args.plot)):
        if path is not None:
            check_output(path, flag)

    if args.n_boot < 0:
        raise UserError(f"--n-boot {args.n_boot} is negative; use 0 (no intervals) or more")
    import math

    for flag, value in (("--predict-at", args.predict_at), ("--fit-until", args.fit_until)):
        if value is not None and not (math.isfinite(value) and value > 0):
            raise UserError(f"{flag} {value}: compute must be a positive number, e.g. {flag} 1e18")
    if not math.isfinite(args.min_compute) or args.min_compute < 0:
        raise UserError(f"--min-compute {args.min_compute}: must be a finite number >= 0")
    shared = None
    if args.r0 == "shared":
        from rlvr.analysis.curves import fit_shared_r0

        loaded = [_load(p, args) for p in args.paths]
        shared, _ = fit_shared_r0([(C[u], R[u]) for _, C, R, u in loaded], max_a_se=args.max_a_se)
        print(f"shared R0 = {shared:.4f} (fitted over {len(loaded)} runs)")
    results = [_fit_one(p, args, shared) for p in args.paths]
    names = [r.name for r in results]
    if len(set(names)) < len(names):  # two runs with the same directory name: show their paths
        for r, p in zip(results, args.paths):
            r.name = str(p)
    print_table(TABLE_HEADERS, _table_rows(results))
    for r in results:
        if not r.fit.bent or r.fit.a_at_bound:
            print(f"note: {r.name}: {r.fit.message}")
    if len(results) > 1:
        for line in _ranking_lines(results):
            print(line)
    if args.json is not None:
        atomic_write(args.json, json.dumps(_to_json(results), indent=2) + "\n")
        print(f"wrote {args.json}")
    if args.plot is not None:
        from rlvr.analysis.curve_plots import CurveSeries, plot_curves

        series = [CurveSeries(r.name, r.C, r.R, r.used, r.fit, r.boot, args.fit_until) for r in results]
        plot_curves(series, args.plot, x_label={"wall": "wall seconds"}.get(args.x, args.x),
                    predict_at=args.predict_at)
        print(f"wrote {args.plot}")
    return 0
