"""The tables ``import_race`` and the start-method checks print: cells and their layout."""

from __future__ import annotations

from collections.abc import Sequence


def format_seconds(seconds: float) -> str:
    """``"120 ms"`` below ten seconds, ``"12.3 s"`` from there."""
    return f"{seconds * 1000:.0f} ms" if seconds < 10 else f"{seconds:.1f} s"


def one_line(text: str) -> str:
    """``text`` with every run of white space (newlines too) made one space."""
    return " ".join(text.split())


def shorten(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters, the last one an ellipsis, when it is longer."""
    return text if len(text) <= width else text[: width - 1] + "…"


def render(rows: Sequence[Sequence[str]]) -> str:
    """The rows (the header first) as indented columns, each as wide as its widest cell."""
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    return "\n".join(
        "  "
        + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )
