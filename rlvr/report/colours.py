"""One colour per name (run, group of seeds, model) for every panel of a page.

A page builds its map once from the names in a fixed order and hands it to every figure, so a
name keeps its colour across panels however many of them a figure draws. Names beyond the
palette's 20 colours reuse it from the start.
"""

from __future__ import annotations

from collections.abc import Iterable

# matplotlib's tab10, then the lighter half of tab20: distinct first, similar hues last
PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
    "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2", "#c7c7c7", "#dbdb8d", "#9edae5",
)


def colour_map(names: Iterable[str]) -> dict[str, str]:
    """{name: hex colour}, colours in palette order over the distinct names in the order given."""
    unique = list(dict.fromkeys(names))
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(unique)}
