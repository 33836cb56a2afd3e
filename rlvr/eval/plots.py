"""PNG figures from eval.json blocks: pass@k curves, support bars, entropy pairs, pass@k by step.

Each ``plot_*`` takes the dicts produced by :mod:`rlvr.eval.summary` and a path,
writes one PNG and returns the path. matplotlib is imported lazily (Agg backend).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rlvr.eval.support import CATEGORIES

Block = Mapping[str, Any]


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: str | os.PathLike[str]) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(p, dpi=120)
    _pyplot().close(fig)
    return p


def plot_pass_at_k(
    models: Mapping[str, Block], path: str | os.PathLike[str], crossover_k: int | None = None
) -> Path:
    """pass@k against k (log2 axis) for every model, with its bootstrap CI as a band.

    ``crossover_k``, when given, is marked with a dashed vertical line: the smallest k at which base
    pass@k is above trained pass@k beyond the 95% interval of the difference.
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, block in models.items():
        ks = [int(k) for k in block["pass_at_k"]]
        ax.plot(ks, list(block["pass_at_k"].values()), marker="o", ms=3, label=name)
        ci = block.get("pass_at_k_ci") or {}
        if all(str(k) in ci for k in ks):
            lo = [ci[str(k)][0] for k in ks]
            hi = [ci[str(k)][1] for k in ks]
            ax.fill_between(ks, lo, hi, alpha=0.2)
    if crossover_k is not None:
        ax.axvline(crossover_k, color="gray", ls="--", lw=1, label=f"base above trained (95%) from k={crossover_k}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("k (samples)")
    ax.set_ylabel("pass@k")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend()
    return _save(fig, path)


def plot_support(support: Block, path: str | os.PathLike[str]) -> Path:
    """Bars of preserved / shrunk / expanded / out-of-support problem counts, rates in the title."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    counts = [support["counts"][c] for c in CATEGORIES]
    bars = ax.bar(CATEGORIES, counts, color=["tab:green", "tab:red", "tab:blue", "tab:gray"])
    ax.bar_label(bars)
    rates = support.get("rates", {})
    text = "  ".join(f"{k}={v:.3f}" if v is not None else f"{k}=n/a" for k, v in rates.items())
    ax.set_title(f"support at n={support.get('n')}\n{text}", fontsize=9)
    ax.set_ylabel("problems")
    return _save(fig, path)


def plot_entropy(models: Mapping[str, Block], path: str | os.PathLike[str]) -> Path:
    """A pair of bars per model: token-level and answer-level entropy (nats); missing ones omitted."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    names = list(models)
    width = 0.38
    for offset, key, label in (
        (-width / 2, "token_entropy", "token"),
        (width / 2, "answer_entropy", "answer"),
    ):
        xs = [i + offset for i, n in enumerate(names) if models[n].get(key) is not None]
        ys = [models[n][key] for n in names if models[n].get(key) is not None]
        ax.bar(xs, ys, width=width, label=f"{label}-level")
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel("entropy (nats)")
    ax.legend()
    return _save(fig, path)


def plot_pass_at_k_by_step(per_step: Mapping[str, Block], path: str | os.PathLike[str]) -> Path:
    """pass@k against the training step (one line per k, its bootstrap CI as a band), from the
    ``per_step`` blocks of a run folder's result (:func:`rlvr.eval.steps.summarize_steps`)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    steps = sorted(per_step, key=int)
    for k in per_step[steps[0]]["pass_at_k"]:
        xs = [int(s) for s in steps]
        ax.plot(xs, [per_step[s]["pass_at_k"][k] for s in steps], marker="o", ms=3, label=f"pass@{k}")
        if all(k in (per_step[s].get("pass_at_k_ci") or {}) for s in steps):
            ax.fill_between(xs, [per_step[s]["pass_at_k_ci"][k][0] for s in steps],
                            [per_step[s]["pass_at_k_ci"][k][1] for s in steps], alpha=0.15)
    ax.set_xlabel("training step")
    ax.set_ylabel("pass@k")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)


def plot_all(result: Block, out_dir: str | os.PathLike[str]) -> list[Path]:
    """Every figure that applies to an eval.json result (one model, a base/trained pair, or a run
    folder's steps: pass_at_k_by_step.png and the pooled block's figures)."""
    out = Path(out_dir)
    if "per_step" in result:
        return [plot_pass_at_k_by_step(result["per_step"], out / "pass_at_k_by_step.png"),
                *plot_all(result["pooled"], out)]
    models = (
        {"base": result["base"], "trained": result["trained"]} if "support" in result else {"model": result}
    )
    paths = [
        plot_pass_at_k(models, out / "pass_at_k.png", result.get("crossover_k")),
        plot_entropy(models, out / "entropy.png"),
    ]
    if "support" in result:
        paths.append(plot_support(result["support"], out / "support.png"))
    return paths
