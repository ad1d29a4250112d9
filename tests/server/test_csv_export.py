"""The text/csv export for people: formula cells neutralised, the table otherwise the same table."""

from __future__ import annotations

import csv
import io

from mcp_analysis.server.csv_export import for_people


def _rows(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text, newline="")))


def test_a_cell_holding_a_line_break_keeps_its_row_whole() -> None:
    table = 'name,note\r\n"two\nlines",=HYPERLINK("http://x")\r\n-3.5,@SUM(A1)\r\n'
    assert _rows(for_people(table)) == [
        ["name", "note"],
        ["two\nlines", '\'=HYPERLINK("http://x")'],
        ["-3.5", "'@SUM(A1)"],
    ]


def test_numbers_stay_numbers_and_a_table_with_no_formula_is_returned_as_it_is() -> None:
    signed = 'name,value\r\n"quoted",+2\r\nplain,-1e-05'
    assert _rows(for_people(signed)) == _rows(signed)
    plain = 'name,value\r\n"quoted",2\r\nplain,x'
    assert for_people(plain) == plain
