"""Tables as data: what `/documents/{id}/tables.json` and `tables/{n}.csv` are read from.

Our knowledge bases keep every table's rows in ``document_tables`` (one row per table, the
CSV zstd-compressed), written with the document's other rows before its commit. Documents
without such rows (haiku.rag databases, which we only read; ours from before the table
existed) have their tables taken from the stored DoclingDocument at read time, limited
to the tables that are items of the document, so the count shown in a listing (from the
items) and the tables read always agree.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import zstandard

from mcp_analysis.errors import TableTooLargeError
from mcp_analysis.ingest.formats.cells import csv_text
from mcp_analysis.ingest.tables import ExtractedTable, extract_tables
from mcp_analysis.store import schema
from mcp_analysis.store.filters import sql_in, sql_quote

TABLES_KEY = "tables"  # document metadata: how many tables ingest stored for the document
_NO_LAYOUT: dict[str, Any] = {"title": "", "notes": [], "header_row": 0, "footer": [], "total_rows": []}
_BYTES_PER_CHAR = 4  # UTF-8: a text of n characters is n to 4n bytes


@dataclass
class TableEntry:
    """One table of a document, without its rows (a tables.json entry, minus chunk ids and path)."""

    index: int
    name: str
    rows: int
    columns: int
    header: list[str]
    page_numbers: list[int]
    self_ref: str
    layout: dict[str, Any] = field(default_factory=lambda: dict(_NO_LAYOUT))  # ExtractedTable.layout_json
    csv_bytes: int | None = None  # the CSV's size; None for tables stored before it was kept


def _entry(t: ExtractedTable) -> TableEntry:
    size = sum(len(line.encode("utf-8")) + 2 for line in t.lines)
    return TableEntry(t.index, t.name, t.rows, t.columns, t.header, t.page_numbers, t.self_ref, t.layout_json(), size)


async def _columns(store: Any) -> set[str]:
    return set((await store.tables[schema.DOCUMENT_TABLES].schema()).names)


async def stored_entries(store: Any, document_id: str) -> list[TableEntry]:
    have = await _columns(store)
    columns = ["index", "name", "rows", "columns", "header", "page_numbers", "self_ref"]
    columns += [c for c in ("layout", "csv_bytes") if c in have]  # missing from older knowledge bases
    rows = (
        await store.tables[schema.DOCUMENT_TABLES]
        .query()
        .where(f"document_id = {sql_quote(document_id)}")
        .select(columns)
        .to_list()
    )
    rows.sort(key=lambda r: r["index"])
    return [
        TableEntry(
            int(r["index"]),
            r["name"] or "",
            int(r["rows"] or 0),
            int(r["columns"] or 0),
            json.loads(r["header"] or "[]"),
            list(r["page_numbers"] or []),
            r["self_ref"] or "",
            {**_NO_LAYOUT, **json.loads(r.get("layout") or "{}")},
            r.get("csv_bytes"),
        )
        for r in rows
    ]


async def _stored_row(store: Any, document_id: str, index: int, columns: list[str]) -> dict[str, Any] | None:
    have = await _columns(store)
    rows = (
        await store.tables[schema.DOCUMENT_TABLES]
        .query()
        .where(f"document_id = {sql_quote(document_id)} AND index = {int(index)}")
        .select([c for c in columns if c in have])
        .limit(1)
        .to_list()
    )
    return rows[0] if rows else None


def _known_size(row: dict[str, Any]) -> int | None:
    """The CSV's uncompressed size: stored, else from its zstd frame header (written by
    `compress()`), else unknown."""
    if row.get("csv_bytes") is not None:
        return int(row["csv_bytes"])
    try:
        size = zstandard.frame_content_size(row["csv"])
    except zstandard.ZstdError:
        return None
    return size if size >= 0 else None


def _bounded_decompress(blob: bytes, most: int, max_chars: int) -> bytes:
    """Decompress a frame of unknown size, stopping (TableTooLargeError) once past `most` bytes."""
    parts: list[bytes] = []
    size = 0
    with zstandard.ZstdDecompressor().stream_reader(blob) as reader:
        while chunk := reader.read(1 << 20):
            parts.append(chunk)
            size += len(chunk)
            if size > most:
                raise TableTooLargeError(f"more than {most:,} bytes", max_chars)
    return b"".join(parts)


async def stored_size(store: Any, document_id: str, index: int) -> int | None:
    """The size in bytes of a stored table's CSV, without decompressing it (None: unknown or no table)."""
    row = await _stored_row(store, document_id, index, ["csv", "csv_bytes"])
    return _known_size(row) if row is not None and row.get("csv") is not None else None


async def stored_csv(store: Any, document_id: str, index: int, max_chars: int) -> str | None:
    """A stored table's CSV, None without such a table; TableTooLargeError over `max_chars`
    characters, raised from the stored size before decompressing, or (a table stored without
    it) from its size in bytes, or once the decompression passes what `max_chars` characters
    can take."""
    row = await _stored_row(store, document_id, index, ["csv", "csv_bytes", "csv_chars"])
    if row is None or row["csv"] is None:
        return None
    chars = row.get("csv_chars")
    if chars is not None and chars > max_chars:
        raise TableTooLargeError(f"{chars:,} characters", max_chars)
    size, most = _known_size(row), max_chars * _BYTES_PER_CHAR
    if size is not None and size > most:
        raise TableTooLargeError(f"{size:,} bytes", max_chars)
    if size is not None:
        text = zstandard.ZstdDecompressor().decompress(row["csv"], max_output_size=size).decode("utf-8")
    else:
        text = _bounded_decompress(row["csv"], most, max_chars).decode("utf-8")
    if len(text) > max_chars:
        raise TableTooLargeError(f"{len(text):,} characters", max_chars)
    return text


async def derived_tables(store: Any, document_id: str, table_refs: list[str]) -> list[ExtractedTable]:
    """Tables from the stored DoclingDocument, those among `table_refs` (the document's table items)."""
    if schema.DOCUMENTS not in store.tables or not table_refs:
        return []
    names = (await store.tables[schema.DOCUMENTS].schema()).names
    if "docling_document" not in names:
        return []
    rows = (
        await store.tables[schema.DOCUMENTS]
        .query()
        .where(f"id = {sql_quote(document_id)}")
        .select(["docling_document"])
        .limit(1)
        .to_list()
    )
    blob = rows[0]["docling_document"] if rows else None
    if not blob:
        return []
    from docling_core.types.doc import DoclingDocument

    try:
        text = zstandard.ZstdDecompressor().decompress(blob, max_output_size=1 << 31)
    except zstandard.ZstdError:
        text = blob  # stored uncompressed
    doc = DoclingDocument.model_validate_json(text)
    wanted = set(table_refs)
    found = [t for t in extract_tables(doc) if t.self_ref in wanted]
    for index, table in enumerate(found):
        table.index = index
    return found


def derived_entries(tables: list[ExtractedTable]) -> list[TableEntry]:
    return [_entry(t) for t in tables]


async def table_item_counts(store: Any, document_ids: list[str]) -> dict[str, int]:
    """How many table items each document has (one query for all of them)."""
    if not document_ids or schema.DOCUMENT_ITEMS not in store.tables:
        return {}
    rows = (
        await store.tables[schema.DOCUMENT_ITEMS]
        .query()
        .where(f"{sql_in('document_id', document_ids)} AND label = 'table'")
        .select(["document_id"])
        .to_list()
    )
    counts: dict[str, int] = dict.fromkeys(document_ids, 0)
    for row in rows:
        counts[row["document_id"]] += 1
    return counts


def derived_csv(tables: list[ExtractedTable], index: int, max_chars: int) -> str | None:
    """A derived table's CSV (TableTooLargeError over `max_chars`, measured before it is joined)."""
    if not 0 <= index < len(tables):
        return None
    size = sum(len(line) + 2 for line in tables[index].lines)
    if size > max_chars:
        raise TableTooLargeError(f"{size:,} characters", max_chars)
    return csv_text(tables[index].lines)
