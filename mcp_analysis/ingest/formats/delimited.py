"""Delimited text (.csv .tsv) -> one table, every row.

The dialect (delimiter, quoting) is sniffed from the first 64 KB; a .tsv is tab-separated
unless sniffing says otherwise. Cells are kept as written except where the reading is
unambiguous (cells.written_cell).
"""

from __future__ import annotations

import csv
import io
import itertools

from docling_core.types.doc import DoclingDocument

from mcp_analysis.errors import IngestError
from mcp_analysis.ingest.formats.base import Converted, Source, decode_text, limit_error
from mcp_analysis.ingest.formats.cells import CsvLines, add_rows_table, written_cell

_SNIFF_CHARS = 64 * 1024


def _dialect(sample: str, suffix: str) -> type[csv.Dialect] | csv.Dialect:
    try:
        return csv.Sniffer().sniff(sample, delimiters=",;\t|")
    except csv.Error:
        return csv.excel_tab if suffix == ".tsv" else csv.excel


def convert(source: Source) -> Converted:
    text = decode_text(source.data)
    suffix = source.suffix
    dialect = _dialect(text[:_SNIFF_CHARS], suffix)
    # The csv module refuses a cell over 128 KB (a JSON blob, a pasted document); the file's size
    # already bounds what a cell can hold.
    csv.field_size_limit(max(csv.field_size_limit(), len(text) + 1))
    encoder = CsvLines()
    lines: list[str] = []
    width = 0
    pending_empty = 0
    row_start = last_row_end = 0  # physical lines before the last row read, and after it
    try:
        reader = csv.reader(io.StringIO(text, newline=""), dialect)
        for row in reader:
            if row:
                last_row_end, row_start = reader.line_num, last_row_end
            cells = [written_cell(c) for c in row]
            while cells and not cells[-1]:
                cells.pop()
            if not cells:
                pending_empty += 1 if lines else 0
                continue
            lines.extend([""] * pending_empty)
            pending_empty = 0
            width = max(width, len(cells))
            lines.append(encoder.line(cells))
            if len(lines) * width > source.limits.max_table_cells:
                raise limit_error(
                    source.limits, "max_table_cells", f"{len(lines) * width:,} table cells at row {len(lines):,}"
                )
    except csv.Error as exc:
        raise IngestError(f"not readable as delimited text ({exc})") from None
    if not lines:
        raise IngestError("no rows")
    doc = DoclingDocument(name=source.stem)
    result = Converted(doc, "csv" if suffix != ".tsv" else "tsv")
    if unclosed := _unclosed_quote(text, dialect, row_start):
        result.warnings.append(unclosed)
    result.tables.append(add_rows_table(doc, source.stem, lines, width))
    return result


def _unclosed_quote(text: str, dialect: type[csv.Dialect] | csv.Dialect, row_start: int) -> str | None:
    """A quote opened in the last row and never closed makes the csv module read the rest of
    the file as one cell: said in a warning (the rows are kept as read, nothing is dropped)."""
    # The lines the reader counted, from the last row's start (never a list of every line of the file).
    tail = "".join(itertools.islice(io.StringIO(text, newline=""), row_start, None))
    lines = sum(1 for _ in io.StringIO(tail, newline=""))
    if lines < 2:
        return None
    try:
        for _ in csv.reader(io.StringIO(tail, newline=""), dialect, strict=True):
            pass
    except csv.Error:
        return (
            f"a quote opened on line {row_start + 1} is never closed: its {lines:,} lines to the end "
            "of the file are read as one cell; close the quote and add the file again"
        )
    return None
