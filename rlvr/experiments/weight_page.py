"""The weights section of a results page: one row per checkpoint of every model a ``kind: weights``
evaluation measured (KL to the base, update norm, sparsity at bf16 and fp32, spectral drift, mean
principal angle, principal energy share over its random baseline), from the cells on disk."""

from __future__ import annotations

import math
from collections.abc import Callable


def _wmean(recs: list[dict], value: Callable[[dict], float]) -> float | None:
    pairs = [(r["numel"], value(r)) for r in recs if "k" in r]
    pairs = [(w, x) for w, x in pairs if x is not None and math.isfinite(x)]
    total = sum(w for w, _ in pairs)
    return sum(w * x for w, x in pairs) / total if total else None


def checkpoint_row(ck: dict) -> dict:
    """The page's numbers of one checkpoint's statistics (parameter-weighted over matrices)."""
    recs = ck["records"]
    numel = sum(r["numel"] for r in recs)

    def ratio(r):
        s = r.get("principal_energy_share")
        return s / r["random_energy_share"] if s is not None and r["random_energy_share"] else None

    return {"checkpoint": ck["name"], "kl": ck["kl"], "norm": ck["update_rel_norm"],
            "sparsity_bf16": 1 - sum(r["changed_bf16"] for r in recs) / numel,
            "sparsity_fp32": 1 - sum(r["changed_fp32"] for r in recs) / numel,
            "drift": _wmean(recs, lambda r: r["spectral_drift"]),
            "angle": _wmean(recs, lambda r: r["principal_angle_mean_deg"]),
            "energy_ratio": _wmean(recs, ratio)}


def _f(x, spec: str) -> str:
    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x, spec)


def weight_lines(exp, seeds_of: Callable, load: Callable) -> list[str]:
    """Markdown lines of the weights section (empty when the experiment has no weights evaluation).
    ``seeds_of(model)`` -> its seeds; ``load(ev, model, seed)`` -> the cell's stats (FileNotFoundError
    when missing)."""
    evs = [e for e in exp.evaluations.values() if e.kind == "weights"]
    if not evs:
        return []
    ev = max(evs, key=lambda e: len(e.models))  # they share one protocol: the widest lists every model
    lines = [f"Every measured checkpoint (evaluation `{ev.name}`, k = {ev.k:g} of each matrix's rank; drift, "
             "angle and energy share over random are parameter-weighted means over matrices).", "",
             "| model | checkpoint | KL to base (nats/token) | \\|\\|dW\\|\\|/\\|\\|W0\\|\\| | sparsity bf16 | "
             "sparsity fp32 | spectral drift | principal angle (deg) | energy share / random |",
             "|---|---|---|---|---|---|---|---|---|"]
    for m in ev.models:
        for s in seeds_of(m):
            try:
                st = load(ev, m, s)
            except FileNotFoundError:
                continue
            for ck in st["checkpoints"]:
                r = checkpoint_row(ck)
                lines.append(f"| {m}{'' if s is None else f'-s{s}'} | {r['checkpoint']} | {_f(r['kl'], '.2e')} | "
                             f"{_f(r['norm'], '.2e')} | {_f(r['sparsity_bf16'], '.4f')} | "
                             f"{_f(r['sparsity_fp32'], '.4f')} | {_f(r['drift'], '.2e')} | {_f(r['angle'], '.3f')} | "
                             f"{_f(r['energy_ratio'], '.2f')} |")
    return lines + [""]
