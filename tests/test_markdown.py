"""Markdown tables, written in one place (archdsl.markdown): one escaping rule for every cell."""

from __future__ import annotations

from archdsl.markdown import cell, table


def test_a_table_is_its_header_its_rule_and_a_line_per_row():
    assert table(["flag", "default"], [["`--x`", 1], ["`--y`", None]]) == [
        "| flag | default |",
        "|---|---|",
        "| `--x` | 1 |",
        "| `--y` | None |",
    ]


def test_a_bar_is_escaped_and_a_line_break_kept_out_of_every_cell_header_included():
    assert cell("`a|b`\nc") == "`a\\|b` c"
    assert table(["a|b"], [["x|y"]]) == ["| a\\|b |", "|---|", "| x\\|y |"]


def test_columns_are_aligned_by_position():
    assert table(["name", "n", "share"], [], align=["left", "right"])[1] == "|:---|---:|---|"
