"""Loss variants compared on one budget: one run per (variant, seed), then held-out pass@1
and entropy of each final policy, as a table and ``sweep.json``."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from rlvr.algo.losses import LOSSES
from rlvr.config import load_config
from rlvr.console import print_table
from rlvr.errors import UserError
from rlvr.log import read_metrics
from rlvr.paths import atomic_write
from rlvr.train.launch import run_training


def sweep_variants(path: str | None, overrides: list[str], variants: list[str], seeds: list[int],
                   progress: str | None = None) -> dict:
    unknown = [v for v in variants if v not in LOSSES]
    if unknown:
        raise UserError(f"unknown loss variant(s) {unknown}; registered: {', '.join(sorted(LOSSES))}")
    base = load_config(path, overrides)
    root = Path(base.train.out_dir) / f"sweep-{base.name}"
    rows = []
    for v in variants:
        for seed in seeds:
            cfg = load_config(path, [*overrides, f"loss.name={v}", "loss.aggregation=", "loss.std_norm=",
                                     f"train.seed={seed}", f"name={base.name}-{v}-s{seed}"])
            run = root / f"{v}-s{seed}"
            if not _finished(run, cfg.train.steps):
                run_training(cfg, run_dir=run, progress=progress)
            m = read_metrics(run)
            last = m[-1]
            held = [r["heldout_pass_rate"] for r in m if "heldout_pass_rate" in r]
            rows.append({"variant": v, "seed": seed, "run": str(run), "heldout_pass_rate": held[-1] if held else None,
                         "heldout_first": held[0] if held else None, "entropy": last["entropy"],
                         "reward": last["reward"], "wall_s": last["wall_s"], "samples": last["samples"]})
    result = {"config": path or "defaults", "overrides": overrides, "rows": rows,
              "summary": _summary(rows, variants)}
    root.mkdir(parents=True, exist_ok=True)
    atomic_write(root / "sweep.json", json.dumps(result, indent=2))
    result["path"] = str(root / "sweep.json")
    return result


def _finished(run: Path, steps: int) -> bool:
    m = read_metrics(run) if run.exists() else []
    return bool(m) and m[-1].get("step") == steps


def _summary(rows: list[dict], variants: list[str]) -> list[dict]:
    out = []
    for v in variants:
        rs = [r for r in rows if r["variant"] == v and r["heldout_pass_rate"] is not None]
        if rs:
            out.append({"variant": v, "seeds": len(rs),
                        "heldout_pass_rate_median": statistics.median(r["heldout_pass_rate"] for r in rs),
                        "heldout_start": statistics.median(r["heldout_first"] for r in rs),
                        "entropy_median": statistics.median(r["entropy"] for r in rs),
                        "wall_s_median": statistics.median(r["wall_s"] for r in rs)})
    return out


def print_sweep(result: dict, plain: bool = False) -> None:
    """The per-variant medians over seeds, then where sweep.json is."""
    print_table(["variant", "seeds", "start", "pass@1", "entropy", "wall_s"],
                [[s["variant"], str(s["seeds"]), f"{s['heldout_start']:.3f}", f"{s['heldout_pass_rate_median']:.3f}",
                  f"{s['entropy_median']:.3f}", f"{s['wall_s_median']:.1f}"] for s in result["summary"]], plain=plain)
    print(f"sweep: {result['path']}")
