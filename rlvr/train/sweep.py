"""Loss variants compared on one budget: one run per (variant, seed), then held-out pass@1
and entropy of each final policy, as a table and ``sweep.json``."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from rlvr.algo.losses import LOSSES
from rlvr.config import load_config, to_dict
from rlvr.console import print_table
from rlvr.errors import UserError
from rlvr.log import read_metrics
from rlvr.paths import atomic_write, claim_new_dir, is_run_dir
from rlvr.train.launch import run_training
from rlvr.train.resume import saved_config


def sweep_variants(path: str | None, overrides: list[str], variants: list[str], seeds: list[int],
                   progress: str | None = None, overwrite: bool = False) -> dict:
    """One run per (variant, seed) under ``train.out_dir/sweep-<name>/<variant>-s<seed>``. A folder
    that already holds the same run is reused when finished and resumed when not; one that holds
    anything else is refused unless ``overwrite`` (then emptied)."""
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
            state = _held_run(run, cfg)
            if state == "other":
                if not overwrite and run.is_dir() and any(run.iterdir()):
                    claim_new_dir(run, False, "sweep cell")  # refused: names what the folder holds
                run_training(cfg, run_dir=run, progress=progress, overwrite=overwrite)
            elif state == "unfinished":
                run_training(resume=run, progress=progress)
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


def _held_run(run: Path, cfg) -> str:
    """What the folder ``run`` holds for the sweep cell ``cfg``: ``finished`` (the same config,
    trained to its last step), ``unfinished`` (the same config, stopped early), else ``other``
    (nothing, or anything else: a new run goes there, refused where the folder is not empty)."""
    if not is_run_dir(run):
        return "other"
    saved = to_dict(saved_config(run))
    want = to_dict(cfg)
    if want["model"]["dtype"] == "auto":  # the saved config holds the resolved precision
        saved["model"].pop("dtype")
        want["model"].pop("dtype")
    if saved != want:
        return "other"
    metrics = read_metrics(run) if (run / "metrics.jsonl").is_file() else []
    return "finished" if metrics and metrics[-1].get("step") == cfg.train.steps else "unfinished"


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
