"""Rows for people and for pipes: a table in a terminal wide enough for it, else tab-separated lines.

A table is drawn only where every cell fits whole (no name or number is ever broken or cut); piped or
redirected output, and a terminal too narrow for the table, get one line per row with every cell whole.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text


def natural_width(columns: tuple[str, ...], rows: list[tuple]) -> int:
    """Characters a table needs for every cell on one line: widest cell per column, padding and borders."""
    widths = [max([len(c)] + [len(str(row[i])) for row in rows]) for i, c in enumerate(columns)]
    return sum(widths) + 3 * len(widths) + 1


def print_rows(console: Console, title: str, columns: tuple[str, ...], rows: list[tuple[str, ...]],
               caption: str | None = None) -> None:
    """Print `rows` under `columns` as a table (a terminal it fits) or as a header and tab-separated rows."""
    if not console.is_terminal or natural_width(columns, rows) > console.width:  # tabs written as they are
        lines = [f"# {title}" + (f" ({caption})" if caption else ""), "\t".join(columns)]
        lines += ["\t".join(str(cell) for cell in row) for row in rows]
        console.file.write("\n".join(lines) + "\n")
        console.file.flush()
        return
    table = Table(title=Text(title), caption=caption)
    for column in columns:
        table.add_column(column, no_wrap=True)
    for row in rows:
        table.add_row(*(Text(str(cell)) for cell in row))
    console.print(table)
