"""Helpers shared by subcommands: the user-facing error type and terminal output."""

from __future__ import annotations

from typing import Any


class CLIError(Exception):
    """An error the user can fix (bad path, bad option); printed as one line, exit code 2."""


def console() -> Any:
    """A rich Console writing to stdout (imported lazily: rich costs ~50 ms)."""
    from rich.console import Console

    return Console(highlight=False)


def print_table(title: str, columns: list[str], rows: list[list[Any]]) -> None:
    from rich.table import Table

    table = Table(title=title)
    for name in columns:
        table.add_column(name, justify="left" if name == columns[0] else "right")
    for row in rows:
        table.add_row(*[_fmt(v) for v in row])
    console().print(table)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    return "" if value is None else str(value)
