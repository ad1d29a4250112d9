"""Reading a knowledge base: metadata, contents, items and chunks, as the layers above see them.

Every read goes through the store's layout, which turns the rows of whatever wrote the
database into ours (for our own databases, a pass-through). Only documents with a
``document_meta`` row exist for the layers above (see writes.py for why).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mcp_analysis.errors import FilterError
from mcp_analysis.store import schema
from mcp_analysis.store.base import StoreBase
from mcp_analysis.store.filters import filter_error_from, normalize_filter, sql_in, sql_quote
from mcp_analysis.store.models import DocumentMeta


class StoreReads(StoreBase):
    """The read methods of the `Store`."""

    async def validate_filter(self, expression: str | None) -> str | None:
        """Check a filter against the metadata table; returns the normalized filter."""
        text = normalize_filter(expression)
        if text is None:
            return None
        if schema.DOCUMENT_META not in self.tables:
            raise FilterError("The knowledge base is empty; add documents before filtering.")
        try:
            await self.tables[schema.DOCUMENT_META].query().where(text).select(["id"]).limit(1).to_list()
        except Exception as exc:
            raise filter_error_from(exc, text) from None
        return text

    async def meta_version(self) -> int:
        if schema.DOCUMENT_META not in self.tables:
            return 0
        return int(await self.tables[schema.DOCUMENT_META].version())

    async def all_meta(self, where: str | None = None) -> list[DocumentMeta]:
        if schema.DOCUMENT_META not in self.tables:
            return []
        query = self.tables[schema.DOCUMENT_META].query()
        if where:
            query = query.where(where)
        rows = await self._layout.meta_rows(await query.to_list(), self.tables)
        return [DocumentMeta.from_row(r) for r in rows]

    async def documents_content(self, document_ids: Sequence[str]) -> dict[str, str]:
        """id -> full text (markdown) of the given documents."""
        rows = (
            await self.tables[schema.DOCUMENTS]
            .query()
            .where(sql_in("id", document_ids))
            .select(["id", "content"])
            .to_list()
        )
        return {row["id"]: row["content"] or "" for row in rows}

    async def items(self, where: str, columns: Sequence[str] | None = None) -> list[dict[str, Any]]:
        query = self.tables[schema.DOCUMENT_ITEMS].query().where(where)
        selected = self._layout.item_columns(columns)
        if selected:
            query = query.select(selected)
        return await self._layout.item_rows(await query.to_list(), self.tables, columns)

    async def item_windows(
        self, windows: Mapping[str, Sequence[tuple[int, int]]], columns: Sequence[str] | None = None
    ) -> list[dict[str, Any]]:
        """The items at positions lo..hi (inclusive) of each document's `windows`, in one query.

        The outer ``document_id IN (...)`` lets the index on ``document_id`` pick the documents'
        rows; the ranges (overlapping or touching ones joined) then keep only the items a window
        holds, so what is read grows with the windows, not with the longest document among them."""
        ranges = " OR ".join(
            f"(document_id = {sql_quote(doc_id)} AND position >= {lo} AND position <= {hi})"
            for doc_id, spans in windows.items()
            for lo, hi in coalesced(spans)
        )
        if not ranges:
            return []
        return await self.items(f"{sql_in('document_id', windows)} AND ({ranges})", columns)

    async def chunks(self, where: str, columns: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """Chunk rows matching `where` (none while the knowledge base has no chunks table yet)."""
        if schema.CHUNKS not in self.tables:
            return []
        query = self.tables[schema.CHUNKS].query().where(where)
        query = query.select(list(columns or ("id", "document_id", "content", "metadata", "order")))
        return await self.complete_chunks(await query.to_list())

    async def complete_chunks(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Chunk rows as our layers read them (the layout derives what its rows lack, e.g. item ranges)."""
        if not rows or "metadata" not in rows[0]:
            return rows
        return await self._layout.chunk_rows(rows, self.tables)

    async def counts(self) -> dict[str, int]:
        return {name: await table.count_rows() for name, table in self.tables.items()}


def coalesced(spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Position ranges with overlapping or touching ones joined, in order."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(spans):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out
