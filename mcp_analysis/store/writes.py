"""Writing a knowledge base atomically, and cleaning up after an ingest that was killed.

Atomicity without multi-table transactions: a document's rows in ``documents``,
``document_items`` and ``chunks`` are written first under a fresh id; its
``document_meta`` row is written last in one commit (merge on uri). Every read
goes through ``document_meta``, so a process killed mid-ingest leaves only
invisible orphans, which the next ingest deletes (under the ingest lock). Every
write asks the layout first: a read-only database is never touched.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa

from mcp_analysis.paths import is_local_path
from mcp_analysis.store import schema
from mcp_analysis.store.filters import sql_in
from mcp_analysis.store.models import DocumentMeta
from mcp_analysis.store.reads import StoreReads
from mcp_analysis.store.settings_row import StoredSettings

log = logging.getLogger(__name__)

# Where a document's rows are, besides its meta row: (table, column holding the document id).
_DOCUMENT_ID_COLUMNS = (
    (schema.DOCUMENTS, "id"),
    (schema.CHUNKS, "document_id"),
    (schema.DOCUMENT_ITEMS, "document_id"),
    (schema.DOCUMENT_TABLES, "document_id"),  # missing from knowledge bases made before it existed
)
# On object storage, rows without a meta row are removed only once this old (see orphan_ids).
ORPHAN_GRACE = timedelta(minutes=10)


@dataclass
class DocumentRows:
    """Everything written for one document."""

    meta: DocumentMeta
    document: dict[str, Any]
    items: list[dict[str, Any]]
    chunks: list[dict[str, Any]]
    tables: list[dict[str, Any]] = field(default_factory=list)  # document_tables rows (store/tables.py)


def _older_than(stamp: datetime, age: timedelta) -> bool:
    """LanceDB reports naive timestamps: old enough whether they mean UTC or local time."""
    if stamp.tzinfo is not None:
        return datetime.now(UTC) - stamp >= age
    return datetime.now(UTC).replace(tzinfo=None) - stamp >= age and datetime.now() - stamp >= age


class StoreWrites(StoreReads):
    """The write methods of the `Store` (they read too: a batch replaces documents by uri)."""

    async def initialize(self, embedder: str, dimension: int) -> None:
        """Create missing tables and the settings row (first ingest)."""
        self.check_writable()
        creators = {
            schema.DOCUMENTS: schema.DOCUMENTS_SCHEMA,
            schema.DOCUMENT_META: schema.DOCUMENT_META_SCHEMA,
            schema.CHUNKS: schema.chunks_schema(dimension),
            schema.DOCUMENT_ITEMS: schema.DOCUMENT_ITEMS_SCHEMA,
            schema.SETTINGS: schema.SETTINGS_SCHEMA,
            schema.DOCUMENT_TABLES: schema.DOCUMENT_TABLES_SCHEMA,
        }
        for name, table_schema in creators.items():
            if name not in self.tables:
                self.tables[name] = await self._connection.create_table(name, schema=table_schema, exist_ok=True)
        if self.settings is None:
            self.settings = StoredSettings(
                schema.SCHEMA_VERSION, embedder, dimension, datetime.now(UTC).isoformat(timespec="seconds")
            )
            await self.tables[schema.SETTINGS].add([{"id": "settings", "settings": self.settings.to_json()}])

    async def write_documents(self, batch: Sequence[DocumentRows]) -> list[str]:
        """Write a batch atomically per document; return ids of documents they replaced."""
        self.check_writable()
        if not batch:
            return []
        old = await self.all_meta(sql_in("uri", [b.meta.uri for b in batch]))
        await self.tables[schema.DOCUMENTS].add(
            pa.Table.from_pylist([b.document for b in batch], schema=schema.DOCUMENTS_SCHEMA)
        )
        items = [row for b in batch for row in b.items]
        if items:
            await self.tables[schema.DOCUMENT_ITEMS].add(
                pa.Table.from_pylist(items, schema=schema.DOCUMENT_ITEMS_SCHEMA)
            )
        tables = [row for b in batch for row in b.tables]
        if tables:
            await self._document_tables_ready()
            await self.tables[schema.DOCUMENT_TABLES].add(
                pa.Table.from_pylist(tables, schema=schema.DOCUMENT_TABLES_SCHEMA)
            )
        chunks = [row for b in batch for row in b.chunks]
        if chunks:
            await self.tables[schema.CHUNKS].add(
                pa.Table.from_pylist(chunks, schema=await self.tables[schema.CHUNKS].schema())
            )
        return await self._commit_meta([b.meta for b in batch], old)

    async def _commit_meta(
        self, metas: Sequence[DocumentMeta], old: Sequence[DocumentMeta], relocated: Sequence[str] = ()
    ) -> list[str]:
        """The commit point of a batch whose rows are written: one merge makes every document of it
        visible at once; then the rows of the documents it replaced (`old`) go. Their ids.
        `relocated`: ids of stored documents among `metas` whose uri may have changed (moved): in
        the same merge, their rows under an uri that no row of `metas` has are removed."""
        meta = pa.Table.from_pylist([m.to_row() for m in metas], schema=schema.DOCUMENT_META_SCHEMA)
        merge = self.tables[schema.DOCUMENT_META].merge_insert("uri").when_matched_update_all()
        merge = merge.when_not_matched_insert_all()
        if relocated:
            merge = merge.when_not_matched_by_source_delete(sql_in("id", relocated))
        await merge.execute(meta)
        replaced = [m.id for m in old]
        if replaced:
            await self.delete_rows(replaced)
        return replaced

    async def _document_tables_ready(self) -> None:
        """document_tables with every column: knowledge bases made before the table, or before
        some of its columns, get them (older rows hold nulls there, which the readers expect)."""
        if schema.DOCUMENT_TABLES not in self.tables:
            self.tables[schema.DOCUMENT_TABLES] = await self._connection.create_table(
                schema.DOCUMENT_TABLES, schema=schema.DOCUMENT_TABLES_SCHEMA, exist_ok=True
            )
        table = self.tables[schema.DOCUMENT_TABLES]
        have = set((await table.schema()).names)
        missing = [f for f in schema.DOCUMENT_TABLES_SCHEMA if f.name not in have]
        if missing:
            await table.add_columns(missing)

    async def update_meta(self, *metas: DocumentMeta) -> None:
        """Rewrite these documents' metadata rows (by id), all in one commit. A document removed
        meanwhile stays removed: its row is not written again without its content."""
        self.check_writable()
        if not metas:
            return
        await (
            self.tables[schema.DOCUMENT_META]
            .merge_insert("id")
            .when_matched_update_all()
            .execute(pa.Table.from_pylist([m.to_row() for m in metas], schema=schema.DOCUMENT_META_SCHEMA))
        )

    async def delete_document(self, document_id: str) -> None:
        """Hide the document first (meta row), then remove its rows."""
        await self.delete_documents([document_id])

    async def delete_documents(self, document_ids: Sequence[str]) -> None:
        """Hide the documents first (meta rows), then remove their rows: one commit per table,
        however many (a folder of 1,000 deleted files is ~6 table versions, not ~6,000)."""
        self.check_writable()
        if not document_ids:
            return
        await self.tables[schema.DOCUMENT_META].delete(sql_in("id", document_ids))
        await self.delete_rows(document_ids)

    async def delete_rows(self, document_ids: Sequence[str]) -> None:
        self.check_writable()
        if not document_ids:
            return
        for name, column in _DOCUMENT_ID_COLUMNS:
            if name in self.tables:
                await self.tables[name].delete(sql_in(column, document_ids))

    # ----------------------------------------------------------------- orphans

    async def orphan_ids(self, settled: timedelta | None = None) -> set[str]:
        """Ids with rows but no meta row: left by an ingest that was killed.

        With `settled`, only ids that already had rows that long ago: on object storage, where
        ingests from several machines may run at once, a younger orphan may be another ingest's
        batch whose meta row is about to be committed.
        """
        if not self.ready:
            return set()
        visible = {r["id"] for r in await self.tables[schema.DOCUMENT_META].query().select(["id"]).to_list()}
        present: set[str] = set()
        for name, column in _DOCUMENT_ID_COLUMNS:
            if name not in self.tables:
                continue
            rows = await self.tables[name].query().select([column]).to_arrow()
            present.update(rows.column(column).unique().to_pylist())
        orphans = present - visible
        if settled is not None and orphans:
            orphans &= await self._ids_settled(settled)
        return orphans

    async def _ids_settled(self, settled: timedelta) -> set[str]:
        """Document ids that had rows in a table version at least `settled` old (empty if unknown)."""
        ids: set[str] = set()
        for name, column in _DOCUMENT_ID_COLUMNS:
            if name not in self.tables:
                continue
            try:
                table = await self._connection.open_table(name)
                old = [v["version"] for v in await table.list_versions() if _older_than(v["timestamp"], settled)]
                if not old:
                    continue
                await table.checkout(max(old))
                rows = await table.query().select([column]).to_arrow()
            except (OSError, RuntimeError, ValueError) as exc:  # that version was cleaned up meanwhile
                log.debug("No settled version of %s: %s", name, exc)
                continue
            ids.update(rows.column(column).unique().to_pylist())
        return ids

    async def remove_orphans(self) -> int:
        self.check_writable()
        # Local knowledge bases have one ingest at a time (a lock file); object stores may not.
        orphans = await self.orphan_ids(None if is_local_path(self.path) else ORPHAN_GRACE)
        if orphans:
            log.info("Removing rows of %d unfinished document(s) from an interrupted ingest", len(orphans))
            await self.delete_rows(sorted(orphans))
        return len(orphans)
