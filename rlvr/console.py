"""Tables on the terminal, in one style for every command: a rich table when stdout is a terminal,
plain aligned text otherwise (a pipe, a file, a test's captured output, or ``--plain``), so that
output read by programs or compared in tests never depends on the terminal or its width.

Plain form: the header, a rule of dashes as wide as the table, then the rows; columns two spaces
apart, the first left-aligned and the rest right-aligned unless ``align`` says otherwise; a row
that is ``None`` draws a rule (a section break). Trailing spaces are dropped.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

Row = Sequence[str] | None
"""One table row (its cells, already formatted), or None for a section break."""


def use_rich(plain: bool = False) -> bool:
    """Whether tables are drawn with rich: stdout is a terminal and ``--plain`` was not given."""
    return not plain and sys.stdout.isatty()


def _alignment(n_columns: int, align: str | None) -> str:
    align = align or "l" + "r" * (n_columns - 1)
    if len(align) != n_columns or set(align) - {"l", "r"}:
        raise ValueError(f"align={align!r}: one 'l' or 'r' per column ({n_columns})")
    return align


def plain_table(headers: Sequence[str], rows: Sequence[Row], align: str | None = None) -> list[str]:
    """The lines of the plain form of a table (see the module docstring)."""
    align = _alignment(len(headers), align)
    cells = [r for r in rows if r is not None]
    widths = [max([len(headers[i]), *(len(r[i]) for r in cells)]) for i in range(len(headers))]

    def line(row: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if a == "l" else c.rjust(w) for c, w, a in zip(row, widths, align)).rstrip()

    rule = "-" * (sum(widths) + 2 * (len(widths) - 1))
    return [line(headers), rule, *(rule if r is None else line(r) for r in rows)]


def print_table(headers: Sequence[str], rows: Sequence[Row], *, align: str | None = None,
                title: str | None = None, plain: bool = False) -> None:
    """Print a table on stdout: rich on a terminal (:func:`use_rich`), else :func:`plain_table`,
    with ``title`` on the line above."""
    align = _alignment(len(headers), align)
    if not use_rich(plain):
        if title:
            print(title)
        print("\n".join(plain_table(headers, rows, align)))
        return
    from rich import box
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD)
    for header, a in zip(headers, align):
        table.add_column(header, justify="left" if a == "l" else "right")
    for row in rows:
        if row is None:
            table.add_section()
        else:
            table.add_row(*row)
    Console(file=sys.stdout).print(table)
