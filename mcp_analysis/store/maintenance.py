"""Keeping a knowledge base fast: indexes, compaction, and what they are.

Run after an ingest (under its lock); a read-only database is never touched.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import anyio

from mcp_analysis.store import schema
from mcp_analysis.store.base import StoreBase
from mcp_analysis.store.lance import FTS, Bitmap, BTree, HnswSq

log = logging.getLogger(__name__)

_CLEANUP_AFTER = timedelta(minutes=30)  # never 0: concurrent readers still use old versions


def vector_index() -> Any:
    """The vector index built past `search.vector_index_min_rows`: HNSW over 8-bit scalar-quantized
    vectors in one partition (bench/search.py measures it against other index types)."""
    return HnswSq(distance_type="cosine", num_partitions=1)


class StoreMaintenance(StoreBase):
    """The index and compaction methods of the `Store`."""

    async def ensure_indexes(self, vector_index_min_rows: int = 0) -> None:
        """Full-text index on chunks, scalar indexes on ids, and (for large knowledge bases) an
        HNSW vector index; idempotent. Below `vector_index_min_rows` the exact scan is fast enough
        (about 10 ms at 10k chunks) and exact; above it, it is not (about 45 ms at 100k).

        ``document_id`` of chunks and items has a Bitmap index: a filtered view's prefilter is an
        IN list of every document it passes, and the expansion reads its hits' documents' items by
        an IN list too; a B-tree looks such lists up value by value (at a million chunks hundreds
        of ids cost a search more than the search itself; bench/prefilter.py), a bitmap by one map
        look-up and a union. A knowledge base made with the B-trees gets the bitmaps."""
        self.check_writable()
        wanted: list[tuple[str, str, Any]] = [
            (schema.CHUNKS, "content_fts", FTS(with_position=True)),
            (schema.CHUNKS, "id", BTree()),
            (schema.CHUNKS, "document_id", Bitmap()),
            (schema.DOCUMENT_ITEMS, "document_id", Bitmap()),
            (schema.DOCUMENT_META, "id", BTree()),
            (schema.DOCUMENT_META, "uri", BTree()),
            (schema.DOCUMENTS, "id", BTree()),
            (schema.DOCUMENT_TABLES, "document_id", BTree()),
        ]
        for table_name, column, config in wanted:
            if table_name not in self.tables:
                continue
            table = self.tables[table_name]
            index = next((ix for ix in await table.list_indices() if ix.columns == [column]), None)
            outdated = index is not None and isinstance(config, Bitmap) and index.index_type == "BTree"
            if index is not None and not outdated:
                continue
            if await table.count_rows() == 0:
                continue
            if outdated:
                await table.drop_index(index.name)  # a second index on the column would not replace it
            await table.create_index(column, config=config, replace=True)
        chunks = self.tables[schema.CHUNKS]
        if vector_index_min_rows and await chunks.count_rows() >= vector_index_min_rows:
            existing = {tuple(ix.columns) for ix in await chunks.list_indices()}
            if ("vector",) not in existing:
                log.info("Building the vector index (HNSW); about 40 s per 100k chunks on 2 cores...")
                await chunks.create_index("vector", config=vector_index(), replace=True)

    async def index_names(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for name, table in self.tables.items():
            out[name] = [f"{ix.index_type}({', '.join(ix.columns)})" for ix in await table.list_indices()]
        return out

    async def optimize(self, vector_index_max_segments: int = 0) -> None:
        """Compact files and fold new rows into the indexes (keeps hybrid search fast).

        LanceDB's optimize folds an add's rows into the vector index as one more segment, each
        searched per query: past `vector_index_max_segments` (0 = never) the segments after the
        first (the one built over the whole table) are merged into one (`merge_vector_segments`)."""
        self.check_writable()
        for name in (
            schema.CHUNKS,
            schema.DOCUMENT_ITEMS,
            schema.DOCUMENT_META,
            schema.DOCUMENTS,
            schema.DOCUMENT_TABLES,
        ):
            if name in self.tables:
                await self.tables[name].optimize(cleanup_older_than=_CLEANUP_AFTER)
        if vector_index_max_segments:
            index, segments = await self._vector_index_segments()
            if segments > vector_index_max_segments:
                await self._merge_vector_segments(index, segments)

    async def _vector_index_segments(self) -> tuple[Any, int]:
        """The chunks' vector index and its segments (None and 0 without one), in one look-up."""
        chunks = self.tables[schema.CHUNKS]
        index = next((ix for ix in await chunks.list_indices() if ix.columns == ["vector"]), None)
        if index is None:
            return None, 0
        return index, int((await chunks.index_stats(index.name)).num_indices)

    async def vector_segments(self) -> int:
        """Segments of the chunks' vector index (0 without one)."""
        return (await self._vector_index_segments())[1]

    async def merge_vector_segments(self) -> None:
        """Merge the vector index's segments after the first into one, the first left as it is.

        lance's ``optimize_indices(num_indices_to_merge=k)`` merges the newest k segments (and any
        unindexed rows) into one: with k = all but one, the first segment, built over the whole
        table, is neither read nor retrained, so the merge costs what the added rows cost
        (lancedb's own optimize offers no merge)."""
        self.check_writable()
        await self._merge_vector_segments(*await self._vector_index_segments())

    async def _merge_vector_segments(self, index: Any, segments: int) -> None:
        if index is None or segments < 3:
            return
        import lance

        chunks = self.tables[schema.CHUNKS]
        dataset = lance.dataset(await chunks.uri(), storage_options=self.lance_options())
        merge = dataset.optimize.optimize_indices
        await anyio.to_thread.run_sync(lambda: merge(index_names=[index.name], num_indices_to_merge=segments - 1))
        await chunks.checkout_latest()
        log.info("Merged %d vector index segments after the first into one", segments - 1)
