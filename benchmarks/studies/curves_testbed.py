"""Is a ScaleRL testbed setting good for curve claims? Reads finished (or running) RL run
directories of one setting (several pretraining and RL seeds), fits the sigmoid with one shared R0
(`rlvr fit --r0 shared`), and reports per run and for the setting: where the midpoint C_mid falls
in the run (target: within its first third), how close the end is to the ceiling (saturation: the
fitted curve's gain still to come after the last point, target < 2 points), whether the fit is bent
(with the bootstrap interval on C_mid), the wall time, and the evaluation noise of one held-out
point (an upper bound: sqrt(0.25 / (problems x samples)) for a fixed problem set).

    python benchmarks/studies/curves_testbed.py RUN_DIR [RUN_DIR ...] [--x samples] [--plot curves.png]

Last line machine-readable.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np
import yaml


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--x", default="samples", help="compute axis (default samples: completions trained on)")
    ap.add_argument("--n-boot", type=int, default=200)
    ap.add_argument("--plot", type=Path, default=None)
    a = ap.parse_args()
    from rlvr.analysis.curve_io import load_run_curve
    from rlvr.analysis.curves import fit_shared_r0, sigmoid_curve
    from rlvr.analysis.predictability import fit_with_replicates
    from rlvr.log import read_metrics

    curves = [load_run_curve(r, x=a.x) for r in a.runs]
    r0, _ = fit_shared_r0([(C, R) for _, C, R in curves])
    print(f"shared R0 = {r0:.4f} over {len(curves)} runs (compute axis: {a.x})")
    out, fits = [], []
    for run, (name, C, R) in zip(a.runs, curves):
        fit, boot = fit_with_replicates(C, R, R0=r0, n_boot=a.n_boot)  # R0 fixed at the shared value
        fits.append(fit)
        cfg = yaml.safe_load((Path(run) / "config.yaml").read_text())
        k, P = cfg["train"]["eval_samples"], cfg["train"]["eval_problems"]
        rows = read_metrics(run)
        wall = rows[-1].get("wall_s", float("nan"))
        mid_frac = fit.C_mid / float(C.max())
        to_come = fit.A - float(sigmoid_curve(C.max(), r0, fit.A, fit.B, fit.C_mid))
        lo, hi = boot.ci["C_mid"]
        rec = {"run": name, "steps": rows[-1]["step"], "wall_min": round(wall / 60, 1), "A": round(fit.A, 3),
               "A_ci": [round(v, 3) for v in boot.ci["A"]], "B": round(fit.B, 2), "C_mid_frac": round(mid_frac, 3),
               "C_mid_ci_frac": [round(lo / C.max(), 3), round(hi / C.max(), 3)], "bent": fit.bent,
               "gain_to_come": round(to_come, 4), "last": round(float(R[-1]), 3),
               "eval_noise_max": round(math.sqrt(0.25 / (k * P)), 4)}
        out.append(rec)
        print(f"{name}: {rec['steps']} steps, {rec['wall_min']} min; A {fit.A:.3f} [{boot.ci['A'][0]:.3f}, "
              f"{boot.ci['A'][1]:.3f}], B {fit.B:.2f}; C_mid at {mid_frac:.0%} of the run "
              f"[{rec['C_mid_ci_frac'][0]:.0%}, {rec['C_mid_ci_frac'][1]:.0%}]; gain still to come "
              f"{to_come * 100:.1f} pts; {'bent' if fit.bent else 'NOT bent: ' + fit.message}; eval noise <= "
              f"{rec['eval_noise_max'] * 100:.2f} pts")
    ok_mid = all(r["C_mid_ci_frac"][1] <= 1 / 3 for r in out)
    ok_sat = all(r["bent"] and r["gain_to_come"] < 0.02 for r in out)
    print(f"midpoint within the first third in every run (interval's upper end): {'yes' if ok_mid else 'no'}; "
          f"saturated (bent, < 2 pts to come) in every run: {'yes' if ok_sat else 'no'}")
    if a.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 4))
        for (name, C, R), fit in zip(curves, fits):
            line = ax.plot(C, R, "o", ms=3, label=f"{name}: A={fit.A:.3f}")[0]
            xs = np.geomspace(C[C > 0].min(), C.max(), 200)
            ax.plot(xs, sigmoid_curve(xs, r0, fit.A, fit.B, fit.C_mid), "-", color=line.get_color())
        ax.set(xscale="log", xlabel=a.x, ylabel="held-out pass rate")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(a.plot, dpi=110)
        print(f"wrote {a.plot}")
    print(json.dumps({"benchmark": "curves_testbed", "shared_R0": round(r0, 4), "runs": out,
                      "midpoint_in_first_third": ok_mid, "saturated": ok_sat}))


if __name__ == "__main__":
    main()
