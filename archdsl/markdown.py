"""Markdown tables, written in one place: the docs' flag tables, a search's report.md and an analysis's report.md
all build theirs here, so that a cell is escaped one way (a `|` as `\\|`, which GitHub's tables read as a `|`
even inside a code span; a line break as a space, which would end the row)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

Align = Literal["left", "right", "center"] | None
_RULES = {None: "---", "left": ":---", "right": "---:", "center": ":---:"}

__all__ = ["Align", "cell", "table"]


def cell(value: object) -> str:
    """`value` as the text of one table cell."""
    return str(value).replace("|", "\\|").replace("\n", " ")


def table(header: Sequence[object], rows: Iterable[Sequence[object]], *, align: Sequence[Align] = ()) -> list[str]:
    """The lines of a Markdown table: `header`, its rule (each column's `align`, by position; none given: the
    renderer's default), then one line per row. Each cell is `str(value)`, escaped by `cell`."""
    rules = [_RULES[align[i] if i < len(align) else None] for i in range(len(header))]
    return [_row(header), "|" + "|".join(rules) + "|", *(_row(row) for row in rows)]


def _row(values: Sequence[object]) -> str:
    return "| " + " | ".join(cell(value) for value in values) + " |"
