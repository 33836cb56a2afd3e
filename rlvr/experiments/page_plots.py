"""Figures of a results page: a fresh matplotlib axes (headless), its labelled, saved form, and the
page's one colour map (a model keeps its colour in every plot of the page)."""

from __future__ import annotations

from pathlib import Path

from rlvr.report.colours import colour_map


def page_colours(exp) -> dict[str, str]:
    """{name: colour} of a results page: every model of ``exp`` in declaration order, then every model
    kind (the lines of the grid plot), so that each plot of the page draws a model in the same colour."""
    return colour_map([*exp.models, *(spec.kind for spec in exp.models.values())])


def new_axes(size: tuple[float, float] = (6, 4)):
    """(fig, ax) on the headless Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=size)


def save_axes(fig, ax, xlabel: str, ylabel: str, path: Path, legend_size: float | None = 8) -> Path:
    """Label, grid and legend ``ax`` (``legend_size`` None: matplotlib's default); write ``fig`` to
    ``path`` (folders made) and close it."""
    import matplotlib.pyplot as plt

    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=legend_size)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
