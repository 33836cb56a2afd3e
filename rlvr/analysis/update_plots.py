"""Plots for ``rlvr weights`` results (the JSON of :func:`rlvr.commands.weights.analyse`).

Per base/tuned pair: per-layer bars of update sparsity and principal energy share (with the
random k^2/(mn) baseline), and the principal-angle spectra of every matrix by kind.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

BAR_KINDS = ("attention", "mlp")
COLORS = {"attention": "tab:blue", "mlp": "tab:orange", "embedding": "tab:green", "lm_head": "tab:red",
          "other": "tab:gray", "norm": "tab:purple"}


def layer_table(per_matrix: list[dict], key: str, kinds: tuple[str, ...] = BAR_KINDS) -> dict[str, dict]:
    """{kind: {layer: parameter-weighted mean of key}} over tensors with a layer index and a value."""
    out: dict[str, dict] = {kind: {} for kind in kinds}
    for kind in kinds:
        acc: dict[int, list[float]] = {}
        for r in per_matrix:
            if r["kind"] == kind and r.get("layer") is not None and r.get(key) is not None:
                w_sum = acc.setdefault(r["layer"], [0.0, 0.0])
                w_sum[0] += r["numel"]
                w_sum[1] += r["numel"] * r[key]
        out[kind] = {layer: s / w for layer, (w, s) in sorted(acc.items()) if w}
    return out


def _bars(ax, table: dict[str, dict], ylabel: str, baseline: dict[str, dict] | None = None) -> None:
    width = 0.8 / max(1, len(table))
    for j, (kind, values) in enumerate(table.items()):
        xs = [layer + (j - (len(table) - 1) / 2) * width for layer in values]
        ax.bar(xs, list(values.values()), width=width, label=kind, color=COLORS.get(kind))
        if baseline is not None and baseline.get(kind):
            ax.scatter(xs, list(baseline[kind].values()), marker="_", s=80, color="black",
                       label="random k²/(mn)" if j == 0 else None, zorder=3)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=8)


def plot_layers(pair: dict, path: Path) -> Path:
    """Two panels: sparsity per layer, principal energy share per layer (log scale)."""
    rows = pair["per_matrix"]
    fig, (ax0, ax1) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    _bars(ax0, layer_table(rows, "sparsity"), "update sparsity")
    _bars(ax1, layer_table(rows, "principal_energy_share"), "principal energy share",
          baseline=layer_table(rows, "random_energy_share"))
    if any(layer_table(rows, "principal_energy_share").values()):
        ax1.set_yscale("log")
    ax0.set_ylim(0, 1)
    layers = sorted({r["layer"] for r in rows if r.get("layer") is not None and r["kind"] in BAR_KINDS})
    if layers:
        step = max(1, len(layers) // 16)
        ax1.set_xticks(layers[::step])
    ax1.set_xlabel("layer")
    fig.suptitle(f"{Path(pair['tuned']).name} vs {Path(pair['base']).name}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_angles(pair: dict, path: Path) -> Path:
    """Principal angles (degrees) of the top-k left and right subspaces, one line per matrix."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, side in zip(axes, ("left", "right")):
        seen: set[str] = set()
        for r in pair["per_matrix"]:
            angles = r.get(f"principal_angles_{side}_deg")
            if not angles:
                continue
            label = None if r["kind"] in seen else r["kind"]
            seen.add(r["kind"])
            ax.plot(range(1, len(angles) + 1), angles, color=COLORS.get(r["kind"], "black"), alpha=0.4,
                    lw=1, label=label)
        ax.set_title(f"{side} singular subspace")
        ax.set_xlabel("principal angle index j")
        if seen:
            ax.legend(fontsize=8)
    axes[0].set_ylabel("angle (degrees)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_results(result: dict, out_dir: str | Path) -> list[Path]:
    """Write ``pair<i>_layers.png`` and ``pair<i>_angles.png`` for every pair; return the paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, pair in enumerate(result["pairs"], start=1):
        paths.append(plot_layers(pair, out / f"pair{i}_layers.png"))
        paths.append(plot_angles(pair, out / f"pair{i}_angles.png"))
    return paths
