"""Cell values as text, and tables into a DoclingDocument.

One rendering for every table, whatever the format: numbers plain (no thousands
separators, no exponent, integers without ".0"), dates and times ISO 8601, booleans as
the spreadsheet shows them (TRUE/FALSE), empty cells empty, line breaks inside a cell a
space. Rows are RFC 4180 CSV lines, one row per line.
A table larger than `WHOLE_CELLS` keeps only its first `PREVIEW_ROWS` rows in the
DoclingDocument; its full rows travel as `TableRows`.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import math
import re
from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from mcp_analysis.ingest.formats.base import TableRows

if TYPE_CHECKING:  # docling is imported where documents are built (the conversion worker), not here
    from docling_core.types.doc import DoclingDocument, NodeItem, ProvenanceItem

WHOLE_CELLS = 5_000  # tables up to this many cells are kept cell by cell in the document
PREVIEW_ROWS = 100  # rows of a larger table the document (and so content.txt) shows
# ... fewer for a wide one: a docling cell is an object of ~1 KB, and docling refuses a table of 1,000,000.
PREVIEW_CELLS = 50_000


def cell_text(value: Any) -> str:
    """A cell value as text (see module docs)."""
    kind = type(value)  # the common cases first: a big sheet calls this once per cell
    if kind is str:
        return one_line(value)
    if kind is float:
        return number_text(value)
    if kind is int:
        return str(value)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return number_text(value)
    if isinstance(value, dt.datetime):
        return value.isoformat(timespec="seconds") if value.microsecond == 0 else value.isoformat()
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return duration_text(value)
    return one_line(str(value))


def one_line(text: str) -> str:
    """Line breaks (and runs of spaces) inside a cell become one space: a table's CSV then has one
    row per line, which `text.splitlines()` splits in the sandbox (it has no io module)."""
    return " ".join(text.split()) if "\n" in text or "\r" in text or "  " in text else text.strip()


def number_text(value: float) -> str:
    """1300.0 -> '1300', 1e12 -> '1000000000000', 1.5e-07 -> '0.00000015'; nan/inf as Python names them."""
    if not math.isfinite(value):
        return str(value)
    if value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    text = repr(value)  # the shortest text that reads back as the same float
    if "e" not in text:
        return text
    text = format(Decimal(text), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def duration_text(value: dt.timedelta) -> str:
    """ISO 8601 duration: 1 day 2 h 30 min -> 'P1DT2H30M'."""
    seconds = value.total_seconds()
    sign = "-" if seconds < 0 else ""
    seconds = abs(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{sign}P{int(days)}D" if days else f"{sign}P"
    clock = "".join(
        f"{number_text(amount)}{unit}" for amount, unit in ((hours, "H"), (minutes, "M"), (secs, "S")) if amount
    )
    return text + ("T" + clock if clock else ("" if days else "T0S"))


_THOUSANDS = re.compile(r"[-+]?\d{1,3}(,\d{3})+\.\d+|[-+]?\d{1,3}(,\d{3}){2,}")
_MONTH_OR_YEAR_FIRST = re.compile(r"\d{4}/\d{1,2}/\d{1,2}|\d{1,2} [A-Za-z]{3,9} \d{4}|[A-Za-z]{3,9} \d{1,2},? \d{4}")
_DATE_FORMATS = ("%Y/%m/%d", "%d %b %Y", "%d %B %Y", "%b %d, %Y", "%B %d, %Y", "%b %d %Y", "%B %d %Y")


def written_cell(cell: str) -> str:
    """A cell written as text (CSV, HTML, DOCX, PDF tables): trimmed, and made plain only where
    the reading is unambiguous: thousands separators that cannot be a decimal comma
    ("1,234,567", "1,234.50") go; dates with a month name or the year first ("31 Mar 2025",
    "2025/03/31") become ISO 8601. "1,234" and "03/04/2025" stay as written."""
    text = one_line(cell)
    if not text or len(text) > 40:
        return text
    if _THOUSANDS.fullmatch(text):
        return text.replace(",", "")
    if _MONTH_OR_YEAR_FIRST.fullmatch(text):
        for form in _DATE_FORMATS:
            try:
                return dt.datetime.strptime(text, form).date().isoformat()
            except ValueError:
                continue
    return text


class CsvLines:
    """Encodes rows as RFC 4180 lines (quoted only where needed, CRLF-free)."""

    def __init__(self) -> None:
        self._buffer = io.StringIO()
        self._writer = csv.writer(self._buffer, lineterminator="\r\n")  # cells with line breaks get quoted

    def line(self, cells: Sequence[str]) -> str:
        joined = ",".join(cells)
        plain = joined.count(",") == len(cells) - 1 and not any(c in joined for c in '"\r\n')
        if plain and (joined or len(cells) != 1):  # nothing to quote: the csv module would write the same
            return joined
        self._buffer.seek(0)
        self._buffer.truncate()
        self._writer.writerow(cells)
        return self._buffer.getvalue()[:-2]


def parse_lines(lines: Iterable[str]) -> list[list[str]]:
    """CSV lines back to cells (a quoted cell may hold line breaks: each line is one row)."""
    return [next(csv.reader(io.StringIO(line, newline="")), []) if line else [] for line in lines]


def csv_text(header_and_rows: Iterable[str]) -> str:
    """A table's lines as one RFC 4180 document (CRLF line ends)."""
    return "".join(line + "\r\n" for line in header_and_rows)


def add_table(
    doc: DoclingDocument,
    rows: Sequence[Sequence[str]],
    *,
    parent: NodeItem | None = None,
    prov: ProvenanceItem | None = None,
    merged: Sequence[tuple[tuple[int, int], tuple[int, int]]] = (),
    header_rows: int = 1,
) -> str:
    """Add `rows` (already text) as a TableItem; returns its self_ref.

    `merged` ranges ((row, col), (last_row, last_col)), relative to `rows`, become spans:
    the top-left cell carries the value, as the file stores it.
    """
    from docling_core.types.doc import TableCell, TableData

    width = max((len(r) for r in rows), default=0)
    data = TableData(num_rows=len(rows), num_cols=width, table_cells=[])
    covered: set[tuple[int, int]] = set()
    spans: dict[tuple[int, int], tuple[int, int]] = {}
    for (r0, c0), (r1, c1) in merged:
        if r0 >= len(rows) or c0 >= width:
            continue
        r1, c1 = min(r1, len(rows) - 1), min(c1, width - 1)
        spans[(r0, c0)] = (r1, c1)
        covered.update((r, c) for r in range(r0, r1 + 1) for c in range(c0, c1 + 1) if (r, c) != (r0, c0))
    for r, row in enumerate(rows):
        for c in range(width):
            if (r, c) in covered:
                continue
            r1, c1 = spans.get((r, c), (r, c))
            data.table_cells.append(
                TableCell(
                    text=row[c] if c < len(row) else "",
                    row_span=r1 - r + 1,
                    col_span=c1 - c + 1,
                    start_row_offset_idx=r,
                    end_row_offset_idx=r1 + 1,
                    start_col_offset_idx=c,
                    end_col_offset_idx=c1 + 1,
                    column_header=r < header_rows,
                )
            )
    return doc.add_table(data=data, parent=parent, prov=prov).self_ref


def add_rows_table(
    doc: DoclingDocument,
    name: str,
    lines: list[str],
    columns: int,
    *,
    parent: NodeItem | None = None,
    prov: ProvenanceItem | None = None,
    merged: Sequence[tuple[tuple[int, int], tuple[int, int]]] = (),
) -> TableRows:
    """A table given as CSV lines: whole in the document when small, else its first rows;
    the returned TableRows holds every row either way."""
    partial = len(lines) * max(columns, 1) > WHOLE_CELLS
    shown = lines[: max(1, min(PREVIEW_ROWS, PREVIEW_CELLS // max(columns, 1)))] if partial else lines
    cells = [row + [""] * (columns - len(row)) for row in parse_lines(shown)]
    self_ref = add_table(doc, cells, parent=parent, prov=prov, merged=merged)
    return TableRows(self_ref, name, columns, lines, partial)
