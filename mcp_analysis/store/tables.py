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
from dataclasses import dataclass
from typing import Any

import zstandard

from mcp_analysis.ingest.formats.cells import csv_text
from mcp_analysis.ingest.tables import ExtractedTable, extract_tables
from mcp_analysis.store import schema
from mcp_analysis.store.filters import sql_in, sql_quote

TABLES_KEY = "tables"  # document metadata: how many tables ingest stored for the document


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


def _entry(t: ExtractedTable) -> TableEntry:
    return TableEntry(t.index, t.name, t.rows, t.columns, t.header, t.page_numbers, t.self_ref)


async def stored_entries(store: Any, document_id: str) -> list[TableEntry]:
    columns = ["index", "name", "rows", "columns", "header", "page_numbers", "self_ref"]
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
        )
        for r in rows
    ]


async def stored_csv(store: Any, document_id: str, index: int) -> str | None:
    rows = (
        await store.tables[schema.DOCUMENT_TABLES]
        .query()
        .where(f"document_id = {sql_quote(document_id)} AND index = {int(index)}")
        .select(["csv"])
        .limit(1)
        .to_list()
    )
    if not rows or rows[0]["csv"] is None:
        return None
    return zstandard.ZstdDecompressor().decompress(rows[0]["csv"]).decode("utf-8")


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


def derived_csv(tables: list[ExtractedTable], index: int) -> str | None:
    return csv_text(tables[index].lines) if 0 <= index < len(tables) else None
