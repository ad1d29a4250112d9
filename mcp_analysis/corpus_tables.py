"""Reading documents' tables for the sandbox and MCP resources (store/tables.py does the I/O).

A document's table count must be cheap to know, since listing /documents lists
`tables/{n}.csv`: ingest records it in the document's metadata ("tables"); documents
without it (haiku.rag databases, older documents of ours) are counted from their table
items, many documents in one query. Entries and derived tables are cached per document.
"""

from __future__ import annotations

from typing import Any

from cachetools import LRUCache

from mcp_analysis.store import schema
from mcp_analysis.store.models import DocumentItem, DocumentMeta
from mcp_analysis.store.tables import (
    TABLES_KEY,
    TableEntry,
    derived_csv,
    derived_entries,
    derived_tables,
    stored_csv,
    stored_entries,
    stored_size,
    table_item_counts,
)

_CACHE_DOCS = 256
_DERIVED_DOCS = 16  # derived tables hold every row: keep few


class TableReader:
    """Tables of one knowledge base's documents (callers check visibility first)."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self._counts: dict[str, int] = {}
        self._entries: LRUCache[str, list[TableEntry]] = LRUCache(maxsize=_CACHE_DOCS)
        self._derived: LRUCache[str, list[Any]] = LRUCache(maxsize=_DERIVED_DOCS)

    def _stored(self, meta: DocumentMeta) -> bool:
        # Only our knowledge bases have the table (haiku.rag's never do), and only documents
        # ingested since it exists record their count.
        return schema.DOCUMENT_TABLES in self.store.tables and isinstance(meta.metadata.get(TABLES_KEY), int)

    @staticmethod
    def _key(meta: DocumentMeta) -> str:
        return f"{meta.id}/{meta.updated_at}"  # haiku.rag rewrites documents under the same id

    async def counts(self, metas: list[DocumentMeta]) -> dict[str, int]:
        """id -> number of tables, for many documents at once."""
        out: dict[str, int] = {}
        unknown: list[DocumentMeta] = []
        for meta in metas:
            known = meta.metadata.get(TABLES_KEY) if self._stored(meta) else self._counts.get(self._key(meta))
            if isinstance(known, int):
                out[meta.id] = known
            else:
                unknown.append(meta)
        for start in range(0, len(unknown), 500):
            batch = unknown[start : start + 500]
            found = await table_item_counts(self.store, [m.id for m in batch])
            for meta in batch:
                self._counts[self._key(meta)] = out[meta.id] = found.get(meta.id, 0)
        return out

    async def entries(self, meta: DocumentMeta, items: list[DocumentItem]) -> list[dict[str, Any]]:
        """tables.json: one entry per table, with the chunk ids of its item and its path."""
        key = self._key(meta)
        cached = self._entries.get(key)
        if cached is None:
            if self._stored(meta):
                cached = await stored_entries(self.store, meta.id)
            else:
                cached = derived_entries(await self._derived_tables(meta, items))
            self._entries[key] = cached
        chunk_ids = {item.self_ref: item.chunk_ids for item in items if item.label == "table"}
        pages = {item.self_ref: item.page_numbers for item in items if item.label == "table"}
        return [
            {
                "index": e.index,
                "name": e.name,
                "rows": e.rows,
                "columns": e.columns,
                "title": e.layout["title"],
                "notes": e.layout["notes"],
                "header": e.header,
                "header_row": e.layout["header_row"],
                "footer": e.layout["footer"],
                "total_rows": e.layout["total_rows"],
                "truncated": e.layout.get("truncated"),
                "size": e.csv_bytes,
                "page_numbers": e.page_numbers or pages.get(e.self_ref, []),
                "self_ref": e.self_ref,
                "chunk_ids": chunk_ids.get(e.self_ref, []),
                "path": f"/documents/{meta.id}/tables/{e.index}.csv",
            }
            for e in cached
        ]

    async def csv(self, meta: DocumentMeta, index: int, items: list[DocumentItem], max_chars: int) -> str | None:
        """Every row of table `index` as RFC 4180 CSV, or None when there is no such table;
        TableTooLargeError past `max_chars` characters, before the rows are decompressed or joined."""
        if self._stored(meta):
            return await stored_csv(self.store, meta.id, index, max_chars)
        return derived_csv(await self._derived_tables(meta, items), index, max_chars)

    async def size(self, meta: DocumentMeta, index: int, items: list[DocumentItem]) -> int | None:
        """The size in bytes of table `index`'s CSV, None when unknown or no such table."""
        if self._stored(meta):
            return await stored_size(self.store, meta.id, index)
        tables = await self._derived_tables(meta, items)
        return derived_entries(tables)[index].csv_bytes if 0 <= index < len(tables) else None

    async def _derived_tables(self, meta: DocumentMeta, items: list[DocumentItem]) -> list[Any]:
        key = self._key(meta)
        cached = self._derived.get(key)
        if cached is None:
            refs = [item.self_ref for item in items if item.label == "table"]
            cached = await derived_tables(self.store, meta.id, refs)
            self._counts[key] = len(cached)
            self._derived[key] = cached
        return cached
