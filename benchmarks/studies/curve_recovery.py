"""Recovery of known sigmoid parameters from noisy synthetic curves (rlvr.analysis.curves).

Each setting is a true curve R(C) = R0 + (A-R0)/(1+(C_mid/C)^B) sampled with Gaussian
noise (sd 0.01) on a compute grid that reaches well beyond C_mid, plus one measurement at
C = 0 that fixes R0 (as `rlvr fit` does by default). Two grids: log-spaced, and
linear ("run-like": a held-out evaluation every k steps). For every setting and seed it
prints true vs recovered A, B, C_mid, then the extrapolation check: fit on the first half
of the compute (C <= C_end/2), predict R(C_end) with a bootstrap prediction interval.
The last line is JSON.

    python benchmarks/studies/curve_recovery.py [--seeds 5] [--n-boot 200] [--r0 fixed|free]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from rlvr.analysis.curves import bootstrap_fit, fit_sigmoid, predict, sigmoid_curve

NOISE_SD = 0.01
# (R0, A, B, C_mid, grid): log grids span C_mid/30 .. 30 C_mid (30 points);
# linear grids span C_end/40 .. C_end = 8 C_mid (40 points).
SETTINGS = [
    (0.10, 0.60, 1.0, 1e3, "log"),
    (0.20, 0.85, 2.0, 1e18, "log"),
    (0.05, 0.40, 0.7, 5e4, "log"),
    (0.30, 0.95, 1.5, 1e2, "log"),
    (0.15, 0.70, 1.2, 3e17, "linear"),
    (0.10, 0.55, 2.5, 2e4, "linear"),
]


def _grid(C_mid: float, kind: str) -> np.ndarray:
    if kind == "log":
        return np.geomspace(C_mid / 30, C_mid * 30, 30)
    return np.linspace(8 * C_mid / 40, 8 * C_mid, 40)


def _one(setting: tuple, seed: int, n_boot: int, free_r0: bool) -> dict:
    R0, A, B, C_mid, kind = setting
    rng = np.random.default_rng(seed)
    C = _grid(C_mid, kind)
    R = sigmoid_curve(C, R0, A, B, C_mid) + rng.normal(0.0, NOISE_SD, C.size)
    R0_meas = None if free_r0 else float(R0 + rng.normal(0.0, NOISE_SD))
    fit = fit_sigmoid(C, R, R0=R0_meas)
    half = C <= C[-1] / 2
    fit_h = fit_sigmoid(C[half], R[half], R0=R0_meas)
    boot = bootstrap_fit(C[half], R[half], n_boot=n_boot, seed=seed, R0=R0_meas,
                         r0_sd=0.0 if free_r0 else fit_h.rmse)
    value, low, high = predict(fit_h, float(C[-1]), boot)
    truth = float(sigmoid_curve(C[-1], R0, A, B, C_mid))
    return {
        "setting": f"R0={R0} A={A} B={B} C_mid={C_mid:g} {kind}", "seed": seed,
        "A": fit.A, "B": fit.B, "C_mid": fit.C_mid, "bent": fit.bent,
        "A_err": fit.A - A, "B_rel_err": fit.B / B - 1.0, "C_mid_rel_err": fit.C_mid / C_mid - 1.0,
        "half_bent": fit_h.bent, "pred": value, "low": low, "high": high, "truth": truth,
        "extrap_err": value - truth, "covered": bool(low <= truth <= high),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--n-boot", type=int, default=200)
    ap.add_argument("--r0", choices=["fixed", "free"], default="fixed")
    args = ap.parse_args()
    t0 = time.perf_counter()
    rows = []
    print(f"{'setting':<38} {'seed':>4} {'A fit':>6} {'A err':>7} {'B fit':>6} {'B rel':>7} {'C_mid rel':>9} "
          f"{'bent':>5} | {'half->end pred [95% PI]':>26} {'truth':>6} {'in':>3}")
    for setting in SETTINGS:
        for seed in range(args.seeds):
            r = _one(setting, seed, args.n_boot, args.r0 == "free")
            rows.append(r)
            print(f"{r['setting']:<38} {seed:>4} {r['A']:6.3f} {r['A_err']:+7.3f} {r['B']:6.3f} "
                  f"{r['B_rel_err']:+7.1%} {r['C_mid_rel_err']:+9.1%} {str(r['bent']):>5} | "
                  f"{r['pred']:6.3f} [{r['low']:.3f}, {r['high']:.3f}]{'':>4} {r['truth']:6.3f} "
                  f"{'yes' if r['covered'] else 'NO':>3}")
    summary = {
        "benchmark": "curve_recovery", "r0": args.r0, "noise_sd": NOISE_SD, "fits": len(rows),
        "all_bent": all(r["bent"] for r in rows),
        "max_abs_A_err": max(abs(r["A_err"]) for r in rows),
        "max_rel_B_err": max(abs(r["B_rel_err"]) for r in rows),
        "max_rel_C_mid_err": max(abs(r["C_mid_rel_err"]) for r in rows),
        "max_abs_extrap_err": max(abs(r["extrap_err"]) for r in rows),
        "extrap_coverage_95": sum(r["covered"] for r in rows) / len(rows),
        "seconds": round(time.perf_counter() - t0, 1),
    }
    print(f"max |A err| = {summary['max_abs_A_err']:.4f}   max rel B err = {summary['max_rel_B_err']:.1%}   "
          f"max |extrapolation err| = {summary['max_abs_extrap_err']:.4f}   "
          f"95% PI coverage = {summary['extrap_coverage_95']:.0%}")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
