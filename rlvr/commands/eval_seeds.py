"""``rlvr eval --samples A B C [--base-samples ...]``: several seeds' samples files of the same problems,
pass@k per seed and over seeds with the seed-level interval (:mod:`rlvr.experiments.seed_passk`)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from rlvr.console import print_table
from rlvr.errors import UserError


def from_seed_files(samples: list[str], base_samples: list[str] | None, how: dict[str, Any],
                    ks: list[int] | None, seed: int, plots: str | None) -> dict[str, Any]:
    """The JSON result: one model's pass@k over seeds, or (with --base-samples) both models' and the
    paired difference trained - base per k. Each file is one seed's samples (no run folders)."""
    from rlvr.eval.importers import iter_any
    from rlvr.experiments.seed_passk import seed_passk, seed_passk_difference

    if plots:
        raise UserError("--plots draws one file's curves; with several seeds' files use --json and plot from it, "
                        "or drop --plots")
    for path in [*samples, *(base_samples or [])]:
        if Path(path).is_dir():
            raise UserError(f"{path} is a folder; with several seeds give one samples file per seed")
    trained = [iter_any(p, **how) for p in samples]  # each file read once, as it is counted
    if not base_samples:
        return {"kind": "seeds", **_finite(seed_passk(trained, samples, ks, seed))}
    base = [iter_any(p, **how) for p in base_samples]
    result = seed_passk_difference(base, trained, base_samples, samples, ks, seed)
    return {"kind": "seed_difference", "seeds": list(samples), "base_seeds": list(base_samples), **_finite(result)}


def _finite(value: Any) -> Any:
    """``value`` with NaN (an interval one seed cannot give) as None, so that it is valid JSON."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def _interval(block: dict[str, Any], signed: bool = False) -> str:
    spec = "+.4f" if signed else ".4f"
    lo, hi = block["ci"]
    inside = "n/a" if lo is None else f"{format(lo, spec)}, {format(hi, spec)}"
    return f"{format(block['mean' if 'mean' in block else 'value'], spec)} [{inside}]"


def print_seed_result(result: dict[str, Any]) -> None:
    """pass@k per k: the seed-level value and interval, then each seed's value and interval; with a
    base, the base's and the trained model's seed-level pass@k beside the difference's."""
    if result["kind"] == "seeds":
        passk = result["pass_at_k"]
        seeds = len(result["seeds"])
        header = ["k", "over seeds [95% seed-level CI]"] + [f"seed {i} [95% CI]" for i in range(seeds)]
        rows = [[k, _interval(b)] + [_interval(s) for s in b["per_seed"]] for k, b in passk.items()]
        print_table(header, rows, align="r" + "l" * (len(header) - 1))
        print(f"{seeds} seeds ({', '.join(result['seeds'])}), {result['problems']} problems, n = {result['n']}")
    else:
        diff = result["difference"]
        seeds = len(result["seeds"])
        header = ["k", "base", "trained", "trained - base [95% seed-level CI]"] + \
            [f"seed {i} difference [95% CI]" for i in range(seeds)]
        rows = [[k, f"{result['reference'][k]['mean']:.4f}", f"{result['other'][k]['mean']:.4f}",
                 _interval(b, signed=True)] + [_interval(s, signed=True) for s in b["per_seed"]]
                for k, b in diff.items()]
        print_table(header, rows, align="r" + "l" * (len(header) - 1))
        print(f"{seeds} seeds, base paired {result['pairing']}; {result['problems']} problems, n = {result['n']}")
    print("seed-level interval: mean over seeds +- sqrt((t s / sqrt S)^2 + h^2), t the Student quantile with "
          "S - 1 degrees of freedom, s the sd of the seeds' values, h their mean bootstrap half-width "
          "(docs/commands/eval.md)")
