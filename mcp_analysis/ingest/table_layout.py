"""Where a table's header row is: title and note rows above it, a footer below, total rows.

Sheets and documents often put a title, a unit or a remark above a table's header and a
"Source: ..." line below its data; a program reading `tables/{n}.csv` with csv.DictReader
wants the header on the first line. Ingest (and the tables derived from a stored
DoclingDocument) finds the header row and keeps what is above and below it as tables.json
fields, so nothing is lost. The heuristic is shape-based and conservative: when unsure, the
first row stays the header, as the table has it.

- A row's *width* is its count of non-empty cells; the table's *typical width* the median
  width of its first non-empty rows. A row is *wide* at half the typical width (at least 2).
- The header is the first wide row among the first `SCAN_ROWS`, when every row above it is
  blank or narrow with its text in the first column (a title, a unit, a remark; a narrow row
  over other columns is a group header: then nothing is detected), at least one row follows
  it, and it reads as a header: most of its cells are text, not numbers or dates (a year
  counts as text: "2024" heads a column as often as it fills one).
- The footer: the narrow rows after the last wide row, from the first blank row among them
  or the first one that opens with a note marker ("Source:", "Note", "*", "(1)"...).
- Total rows (kept as data): rows whose first non-empty cell is Total, Subtotal, Grand total
  or Sum.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from mcp_analysis.ingest.formats.cells import parse_lines

SCAN_ROWS = 20  # a header further down is not looked for
_TYPICAL_ROWS = 200  # rows measured for the typical width
_FOOTER_ROWS = 20  # rows from the end looked at for a footer
MAX_TOTAL_ROWS = 1000  # total rows listed at most

_VALUE = re.compile(
    r"[-+(]?[$€£¥]?\s?(\d[\d,]*(\.\d*)?|\.\d+)([eE][-+]?\d+)?\s?%?\)?"  # 12, -3.5, $1,200, 15.9%, (40)
    r"|\d{4}-\d{2}-\d{2}([T ][\d:.]+)?"  # ISO dates and times
)
_YEAR = re.compile(r"(1[89]|2[01])\d\d")
_NOTE = re.compile(r"(sources?|notes?|nb|n\.b\.|footnotes?|remarks?)\b|[*†‡¹²³]|\(\d{1,2}\)|\[\d{1,2}\]", re.I)
_TOTAL_LINE = re.compile(r'(?:"?\s*"?,)*"?\s*(grand\s+total|sub-?total|totals?|sum)\s*:?\s*"?(,|$)', re.I)


@dataclass
class Layout:
    """Where the data is in a table's rows (`header_row` indexes the rows as the table has them)."""

    header_row: int = 0
    title: str = ""
    notes: list[str] = field(default_factory=list)
    footer: list[str] = field(default_factory=list)
    footer_rows: int = 0  # rows at the end that make the footer (blank ones included)
    total_rows: list[int] = field(default_factory=list)  # data rows (0 = first after the header) that are totals


def _width(row: list[str]) -> int:
    return sum(1 for cell in row if cell.strip())


def _text(row: list[str]) -> str:
    return " ".join(cell.strip() for cell in row if cell.strip())


def _reads_as_header(row: list[str]) -> bool:
    cells = [cell.strip() for cell in row if cell.strip()]
    values = [cell for cell in cells if _VALUE.fullmatch(cell) and not _YEAR.fullmatch(cell)]
    return len(values) * 2 <= len(cells) and len(set(cells)) > 1


def _first_column(row: list[str]) -> bool:
    return bool(row) and bool(row[0].strip())


def _typical(widths: list[int]) -> int:
    filled = sorted(w for w in widths if w)
    return filled[len(filled) // 2] if filled else 0


def _header(rows: list[list[str]], wide: int) -> int:
    """The header row's index among `rows` (the table's first rows), 0 when none stands out."""
    for index, row in enumerate(rows):
        width = _width(row)
        if width >= wide:
            return index if index + 1 < len(rows) and _reads_as_header(row) else 0
        if width and not _first_column(row):
            return 0  # a group header over some columns: the table starts here, as it is
    return 0


def _footer(rows: list[list[str]], wide: int) -> int:
    """How many of the last `rows` are a footer (see module docs)."""
    last_wide = max((i for i, row in enumerate(rows) if _width(row) >= wide), default=-1)
    if last_wide < 0:
        return 0
    tail = rows[last_wide + 1 :]
    for offset, row in enumerate(tail):
        if not _width(row) or _NOTE.match(_text(row)):
            return len(tail) - offset
    return 0


def detect(lines: list[str]) -> Layout:
    """The layout of a table given as CSV lines (see module docs)."""
    if len(lines) < 2:
        return Layout()
    head = parse_lines(lines[:_TYPICAL_ROWS])
    wide = max(2, (_typical([_width(r) for r in head]) + 1) // 2)
    header_row = _header(head[:SCAN_ROWS], wide)
    start = max(header_row + 1, len(lines) - _FOOTER_ROWS)
    footer_rows = _footer(parse_lines(lines[start:]), wide) if start < len(lines) else 0
    above = [_text(row) for row in head[:header_row] if _width(row)]
    body = lines[header_row + 1 : len(lines) - footer_rows]
    totals = [i for i, line in enumerate(body) if _TOTAL_LINE.match(line)][:MAX_TOTAL_ROWS]
    footer = [_text(row) for row in parse_lines(lines[len(lines) - footer_rows :]) if _width(row)]
    return Layout(header_row, above[0] if above else "", above[1:], footer if footer_rows else [], footer_rows, totals)
