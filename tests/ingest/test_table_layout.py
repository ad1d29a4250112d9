"""The header-row heuristic on hand-made table shapes (the sample's files are not among them):
rows above a wide, text-like row are a title and notes, narrow rows after a blank row or a note
marker are a footer, and anything ambiguous keeps the first row as the header."""

from __future__ import annotations

import pytest

from mcp_analysis.ingest.table_layout import Layout, detect


def test_title_unit_and_blank_rows_above_a_header_and_a_source_line_below() -> None:
    lines = [
        '"Ship calls by port, 2024"',
        "Unit: calls",
        "",
        "Port,Jan,Feb,Mar,Total",
        "Bergen,10,12,9,31",
        "Oslo,4,6,8,18",
        "Total,14,18,17,49",
        "",
        '"Source: port authority, provisional"',
        "* March estimated",
    ]
    layout = detect(lines)
    assert layout.header_row == 3 and layout.title == "Ship calls by port, 2024" and layout.notes == ["Unit: calls"]
    assert layout.footer == ["Source: port authority, provisional", "* March estimated"] and layout.footer_rows == 3
    assert layout.total_rows == [2]  # kept as data, flagged


def test_year_columns_head_a_table() -> None:
    layout = detect(["Fleet size", "Region,2022,2023,2024", "North,3,4,5", "South,6,7,8"])
    assert (layout.header_row, layout.title) == (1, "Fleet size")


def test_a_footnote_marker_ends_the_data_without_a_blank_row() -> None:
    assert detect(["a,b,c", "1,2,3", "(1) restated"]).footer == ["(1) restated"]


@pytest.mark.parametrize(
    "lines",
    [
        ["region,amount", "North,10", "South,30"],  # a plain table
        ["Title", "1,2,3", "4,5,6"],  # no header row: numbers are data
        [",Revenue,,Cost,", "Region,2024,2025,2024,2025", "N,1,2,3,4"],  # a group header over some columns
        ["a", "b", "c"],  # one column
        ["Name,Alice", "Age,30"],  # key-value pairs
        ["Only a title", "Region,Q1"],  # a header without data under it
    ],
)
def test_ambiguous_shapes_keep_the_first_row_as_the_header(lines: list[str]) -> None:
    assert detect(lines).header_row == 0 and detect(lines).title == ""


def test_a_sparse_last_row_without_blank_or_marker_stays_data() -> None:
    layout = detect(["item,qty,note", "bolts,4,spare", "nuts,,"])
    assert layout == Layout()
