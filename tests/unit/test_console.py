"""rlvr.console: the one table style of every command (rich on a terminal, plain text otherwise)."""

from __future__ import annotations

import io
import sys

import pytest

from rlvr.console import plain_table, print_table

HEADERS = ["run", "A", "note"]
ROWS = [["quickstart-20250101-120301", "0.596", "ok"], None, ["b", "12.5", "not bent"]]


def test_plain_table_aligns_columns_and_draws_section_rules():
    lines = plain_table(HEADERS, ROWS, align="lrl")
    assert lines == ["run                             A  note",
                     "-" * 43,
                     "quickstart-20250101-120301  0.596  ok",
                     "-" * 43,
                     "b                            12.5  not bent"]
    with pytest.raises(ValueError, match="one 'l' or 'r' per column"):
        plain_table(HEADERS, ROWS, align="lr")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_print_table_is_plain_off_a_terminal_and_with_plain_rich_on_one(monkeypatch, capsys):
    print_table(HEADERS, ROWS, align="lrl", title="fits")
    assert capsys.readouterr().out.splitlines() == ["fits", *plain_table(HEADERS, ROWS, align="lrl")]
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    print_table(HEADERS, ROWS, align="lrl", plain=True)  # --plain on a terminal
    assert terminal.getvalue().splitlines() == plain_table(HEADERS, ROWS, align="lrl")
    terminal.truncate(0), terminal.seek(0)
    print_table(HEADERS, ROWS, align="lrl")
    drawn = terminal.getvalue()
    assert "quickstart-20250101-120301" in drawn and "not bent" in drawn
    assert drawn.splitlines() != plain_table(HEADERS, ROWS, align="lrl")  # rich's own drawing
