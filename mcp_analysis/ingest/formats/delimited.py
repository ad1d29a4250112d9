"""Delimited text (.csv .tsv) -> one table, every row.

The dialect (delimiter, quoting) is sniffed from the first 64 KB; a .tsv is tab-separated
unless sniffing says otherwise. Cells are kept as written except where the reading is
unambiguous (cells.written_cell).
"""

from __future__ import annotations

import csv
import io

from docling_core.types.doc import DoclingDocument

from mcp_analysis.errors import IngestError
from mcp_analysis.ingest.formats.base import Converted, Source, decode_text, limit_error
from mcp_analysis.ingest.formats.cells import CsvLines, add_rows_table, written_cell

SUFFIXES = (".csv", ".tsv")
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
    try:
        for row in csv.reader(io.StringIO(text, newline=""), dialect):
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
    result.tables.append(add_rows_table(doc, source.stem, lines, width))
    return result
