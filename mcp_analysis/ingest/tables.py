"""Every table of a document as data: name, title, header, every row as CSV, pages.

One list per document in reading order, whatever the format: tables a converter read as
rows (sheets, CSV files) come with their names and every row; the others (HTML,
Markdown, DOCX, PDF, slides, ODF) are taken from the document's TableItems, a cell's text
at its top-left position (as spreadsheets store merged cells). Body tables with cells only,
as the document's items have them. A title or notes above the header row and a footer below
the data are kept apart (table_layout.py), so the CSV starts at the header row; a table over
`ingest.max_table_chars` keeps its first rows (`truncated`). This is what
`/documents/{id}/tables.json` and `tables/{index}.csv` serve, and what the chunker groups
into rows-with-header chunks. It works on a stored DoclingDocument too (haiku.rag
databases, documents ingested before tables were kept).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import zstandard

from mcp_analysis.ingest.formats.base import TableRows
from mcp_analysis.ingest.formats.cells import CsvLines, csv_text, parse_lines, written_cell
from mcp_analysis.ingest.table_layout import Layout, detect

if TYPE_CHECKING:  # docling is imported where documents are built (the conversion worker), not here
    from docling_core.types.doc import DoclingDocument, TableItem


@dataclass
class ExtractedTable:
    index: int
    self_ref: str
    name: str
    columns: int
    lines: list[str]  # every row from the header row down (the footer left out), RFC 4180
    page_numbers: list[int] = field(default_factory=list)
    partial_in_document: bool = False  # the DoclingDocument shows only the first rows
    layout: Layout = field(default_factory=Layout)  # title, notes and footer left out of `lines`
    source_rows: int = 0  # rows of `lines` before a truncation (0: not truncated)

    @property
    def header(self) -> list[str]:
        return parse_lines(self.lines[:1])[0] if self.lines else []

    @property
    def rows(self) -> int:
        return len(self.lines)

    @property
    def truncated(self) -> bool:
        return self.source_rows > self.rows

    def layout_json(self) -> dict[str, Any]:
        """What tables.json says of the rows left out of the CSV (stored as the `layout` column)."""
        out: dict[str, Any] = {
            "title": self.layout.title,
            "notes": self.layout.notes,
            "header_row": self.layout.header_row,
            "footer": self.layout.footer,
            "total_rows": self.layout.total_rows,
        }
        if self.truncated:
            out["truncated"] = {"rows_kept": self.rows, "rows": self.source_rows}
        return out


def with_layout(table: ExtractedTable) -> ExtractedTable:
    """The table from its header row down, its footer apart (see table_layout.py)."""
    layout = detect(table.lines)
    if layout.header_row or layout.footer_rows:
        table.lines = table.lines[layout.header_row : len(table.lines) - layout.footer_rows]
    table.layout = layout
    return table


def truncate(table: ExtractedTable, max_chars: int) -> str | None:
    """Keep the table's first rows that fit `max_chars` characters of CSV; the warning, if any were cut."""
    size = kept = 0
    for line in table.lines:
        size += len(line) + 2
        if size > max_chars:
            break
        kept += 1
    else:
        return None
    total = sum(len(line) + 2 for line in table.lines)
    table.source_rows, table.lines = len(table.lines), table.lines[:kept]
    return (
        f"table {table.name!r} is {total:,} characters of CSV, more than ingest.max_table_chars ({max_chars:,}) "
        f"allows: its first {kept:,} of {table.source_rows:,} rows are kept (raise ingest.max_table_chars "
        "to keep them all)"
    )


def _caption(item: TableItem, doc: DoclingDocument) -> str:
    try:
        return " ".join(item.caption_text(doc).split())[:200]
    except Exception:  # a caption ref that does not resolve is no reason to lose the table
        return ""


def table_lines(item: TableItem) -> tuple[list[str], int]:
    """A TableItem's cells as CSV lines (text at each cell's top-left position) and its width."""
    data = item.data
    rows, width = data.num_rows, data.num_cols
    grid = [[""] * width for _ in range(rows)]
    for cell in data.table_cells:
        r, c = cell.start_row_offset_idx, cell.start_col_offset_idx
        if 0 <= r < rows and 0 <= c < width:
            grid[r][c] = written_cell(cell.text or "")
    encoder = CsvLines()
    lines = []
    for row in grid:
        while row and not row[-1]:
            row.pop()
        lines.append(encoder.line(row) if row else "")
    while lines and not lines[-1]:
        lines.pop()
    return lines, width


def extract_tables(
    doc: DoclingDocument,
    read_as_rows: Sequence[TableRows] = (),
    max_chars: int | None = None,
    warnings: list[str] | None = None,
) -> list[ExtractedTable]:
    """The document's tables in reading order (see module docs); a table over `max_chars`
    characters of CSV is truncated, a warning added to `warnings`."""
    from docling_core.types.doc import ContentLayer, TableItem

    known = {t.self_ref: t for t in read_as_rows}
    out: list[ExtractedTable] = []
    for item, _level in doc.iterate_items(included_content_layers={ContentLayer.BODY}):
        if not isinstance(item, TableItem) or not item.data.table_cells:
            continue
        pages = sorted({p.page_no for p in item.prov or []})
        rows = known.get(item.self_ref)
        if rows is not None:
            table = ExtractedTable(len(out), item.self_ref, rows.name, rows.columns, rows.lines, pages, rows.partial)
        else:
            lines, width = table_lines(item)
            if not lines:
                continue
            name = _caption(item, doc) or f"Table {len(out) + 1}"
            table = ExtractedTable(len(out), item.self_ref, name, width, lines, pages)
        out.append(with_layout(table))
        cut = truncate(table, max_chars) if max_chars is not None else None
        if cut and warnings is not None:
            warnings.append(cut)
    return out


@dataclass(frozen=True)
class PackedTable:
    """A table as the store keeps it (store/rows.py names the columns): its description, and its lines
    as one zstd-compressed RFC 4180 text with that text's size."""

    index: int
    self_ref: str
    name: str
    rows: int
    columns: int
    header: list[str]
    page_numbers: list[int]
    layout: dict[str, Any]  # ExtractedTable.layout_json
    csv: bytes
    csv_bytes: int
    csv_chars: int


def pack_tables(tables: list[ExtractedTable]) -> list[PackedTable]:
    """The tables packed for the store, in the conversion worker, so the ingest holds 100,000 rows
    as a few MB of bytes, not as strings."""
    compressor = zstandard.ZstdCompressor(level=6)
    packed = []
    for t in tables:
        text = csv_text(t.lines)
        data = text.encode("utf-8")
        packed.append(
            PackedTable(
                t.index, t.self_ref, t.name, t.rows, t.columns, t.header, t.page_numbers, t.layout_json(),
                compressor.compress(data), len(data), len(text),
            )
        )  # fmt: skip
    return packed


MAX_TABLE_CHUNKS = 200  # a table becomes at most this many chunks, however many rows it has
_SAMPLE_ROWS = 200


@dataclass
class RowGroup:
    """One chunk of a table's rows: `text` (the header line, then every row of the group) is what
    the full-text index and the passage hold; `lead` (the header line, then the group's first
    rows that fit the token budget) is what the embedder is given: a group of 500 rows
    would otherwise be tokenized whole only for its first 256 tokens to be kept, and a
    remote embedder would be sent (and refuse or bill) the whole group."""

    text: str
    lead: str


def row_groups(
    table: ExtractedTable, count_tokens: Callable[[Sequence[str]], list[int]], max_tokens: int, max_chunks: int
) -> list[RowGroup]:
    """The table as chunks: its title and header line, then as many rows as fit `max_tokens`
    (the notes open the first chunk, the footer closes the last).

    Rows are sized from a sample (tokenizing 100,000 rows one by one costs more than it
    tells); past `max_chunks` chunks the groups grow instead, so a huge sheet stays a
    bounded number of chunks (the full-text index still sees every row; the embedder
    sees each group's lead).
    """
    title = table.layout.title
    if len(table.lines) <= 1:
        text = "\n".join(filter(None, [title, *table.lines[:1]]))
        return [RowGroup(text, text)] if text else []
    header, body = "\n".join(filter(None, [title, table.lines[0]])), table.lines[1:]
    sample = body[:: max(1, len(body) // _SAMPLE_ROWS)][:_SAMPLE_ROWS]
    per_row = max(1.0, sum(count_tokens(sample)) / len(sample))
    room = max(1.0, max_tokens - count_tokens([header])[0])
    fits = max(1, int(room // per_row))
    per_chunk = max(fits, math.ceil(len(body) / max(1, max_chunks)))
    starts = range(0, len(body), per_chunk)
    leads = _leads(header, [body[i : i + min(fits, per_chunk)] for i in starts], count_tokens, max_tokens)
    groups = [
        RowGroup("\n".join([header, *body[i : i + per_chunk]]), lead) for i, lead in zip(starts, leads, strict=True)
    ]
    if table.layout.notes:  # the full-text index keeps every word of the table: notes with the first rows
        opening = "\n".join(filter(None, [title, *table.layout.notes, table.lines[0]]))
        groups[0].text = opening + groups[0].text[len(header) :]
    if table.layout.footer:
        groups[-1].text = "\n".join([groups[-1].text, *table.layout.footer])
    return groups


def _leads(
    header: str, firsts: list[list[str]], count_tokens: Callable[[Sequence[str]], list[int]], max_tokens: int
) -> list[str]:
    """Each group's header and first rows, rows dropped from the end while over `max_tokens`
    (the rows were sized from a sample; a long row is measured here), keeping at least one."""
    leads = ["\n".join([header, *rows]) for rows in firsts]
    over = [i for i, size in enumerate(count_tokens(leads)) if size > max_tokens]
    for i in over:
        rows = firsts[i]
        while len(rows) > 1 and count_tokens(["\n".join([header, *rows])])[0] > max_tokens:
            rows = rows[:-1]
        leads[i] = "\n".join([header, *rows])
    return leads
