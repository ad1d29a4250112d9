"""The LanceDB database: opening, checking, writing atomically, maintaining.

Atomicity without multi-table transactions: a document's rows in ``documents``,
``document_items`` and ``chunks`` are written first under a fresh id; its
``document_meta`` row is written last in one commit (merge on uri). Every read
goes through ``document_meta``, so a process killed mid-ingest leaves only
invisible orphans, which the next ingest deletes (under the ingest lock).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import lancedb
import pyarrow as pa
from lancedb.index import FTS, BTree, HnswSq

from mcp_analysis.config import is_local_path
from mcp_analysis.errors import (
    DatabaseMismatchError,
    DatabaseNotFoundError,
    FilterError,
    StorageUnavailableError,
    storage_error_message,
)
from mcp_analysis.store import schema
from mcp_analysis.store.filters import filter_error_from, normalize_filter, sql_in, sql_quote
from mcp_analysis.store.models import DocumentMeta

log = logging.getLogger(__name__)

_CLEANUP_AFTER = timedelta(minutes=30)  # never 0: concurrent readers still use old versions


@dataclass
class StoredSettings:
    schema_version: int
    embedder: str
    vector_dim: int
    created_at: str = ""

    def to_json(self) -> str:
        return json.dumps(
            {
                "version": self.schema_version,
                "embeddings": {"model": self.embedder, "vector_dim": self.vector_dim},
                "created_at": self.created_at,
                "app": "mcp-analysis",
            }
        )

    @classmethod
    def from_json(cls, text: str) -> StoredSettings:
        data = json.loads(text)
        emb = data.get("embeddings") or {}
        return cls(
            schema_version=int(data.get("version", 0)),
            embedder=str(emb.get("model", "")),
            vector_dim=int(emb.get("vector_dim", 0)),
            created_at=str(data.get("created_at", "")),
        )


@dataclass
class DocumentRows:
    """Everything written for one document."""

    meta: DocumentMeta
    document: dict[str, Any]
    items: list[dict[str, Any]]
    chunks: list[dict[str, Any]]


# Object stores: fail within seconds, not after object_store's default 3 minutes of retries, so a
# store outage reaches clients (and /healthz) as a clear error. Settings in `storage_options` win.
OBJECT_STORE_DEFAULTS = {
    "connect_timeout": "5s",
    "timeout": "60s",
    "client_max_retries": "3",
    "client_retry_timeout": "15",
}


# On object storage, rows without a meta row are removed only once this old (see orphan_ids).
ORPHAN_GRACE = timedelta(minutes=10)


def _older_than(stamp: datetime, age: timedelta) -> bool:
    """LanceDB reports naive timestamps: old enough whether they mean UTC or local time."""
    if stamp.tzinfo is not None:
        return datetime.now(UTC) - stamp >= age
    return datetime.now(UTC).replace(tzinfo=None) - stamp >= age and datetime.now() - stamp >= age


def object_store_options(location: str, configured: dict[str, str] | None) -> dict[str, str] | None:
    """LanceDB storage options for `location`: none for local paths (AWS_* variables are read by LanceDB)."""
    if is_local_path(location):
        return dict(configured) if configured else None
    return {**OBJECT_STORE_DEFAULTS, **(configured or {})}


class Store:
    """Async LanceDB tables of one knowledge base."""

    def __init__(
        self,
        path: str,
        db: Any,
        tables: dict[str, Any],
        settings: StoredSettings | None,
        storage_options: dict[str, str] | None = None,
    ) -> None:
        self.path = path
        self.db = db
        self.tables = tables
        self.settings = settings
        self.storage_options = storage_options

    @classmethod
    async def open(
        cls,
        path: str | Path,
        *,
        create: bool = False,
        read_consistency: timedelta | None = timedelta(seconds=1),
        storage_options: dict[str, str] | None = None,
    ) -> Store:
        """Open the knowledge base at `path` (create the directory and tables if `create`).

        `path` is a directory or an object-store URI (s3://bucket/prefix, gs://, az://).
        """
        location = str(path)
        try:
            return await cls._open(location, create, read_consistency, storage_options)
        except (OSError, RuntimeError, ValueError) as exc:
            if is_local_path(location):
                raise
            raise StorageUnavailableError(storage_error_message(location, exc)) from exc

    @classmethod
    async def _open(
        cls,
        location: str,
        create: bool,
        read_consistency: timedelta | None,
        storage_options: dict[str, str] | None,
    ) -> Store:
        if is_local_path(location):
            p = Path(location)
            if not p.exists():
                if not create:
                    raise DatabaseNotFoundError(
                        f"No knowledge base at {p}. Create one with `mcp-analysis add PATH --db {p}`, "
                        "point --db / MCP_ANALYSIS_DB at an existing one, or try `mcp-analysis serve --sample`."
                    )
                p.mkdir(parents=True, exist_ok=True)
            elif not p.is_dir():
                raise DatabaseNotFoundError(f"{p} is a file, not a LanceDB knowledge base directory.")
        options = object_store_options(location, storage_options)
        db = await lancedb.connect_async(location, read_consistency_interval=read_consistency, storage_options=options)
        names = set((await db.list_tables()).tables)
        tables: dict[str, Any] = {}
        for name in schema.TABLES:
            if name in names:
                tables[name] = await db.open_table(name)
        if not tables and not create:
            raise DatabaseNotFoundError(
                f"{location} holds no knowledge base tables. "
                f"Add documents with `mcp-analysis add PATH --db {location}`."
            )
        missing_core = {schema.DOCUMENT_META, schema.SETTINGS} - tables.keys()
        if tables and missing_core and not create:
            raise DatabaseMismatchError(
                f"{location} is not an mcp-analysis / haiku.rag knowledge base "
                f"(missing tables: {', '.join(sorted(missing_core))})."
            )
        stored = None
        if schema.SETTINGS in tables:
            rows = await tables[schema.SETTINGS].query().limit(1).to_list()
            if rows:
                stored = StoredSettings.from_json(rows[0]["settings"])
                if stored.schema_version > schema.SCHEMA_VERSION:
                    raise DatabaseMismatchError(
                        f"{location} uses schema version {stored.schema_version}; this mcp-analysis understands "
                        f"up to {schema.SCHEMA_VERSION}. Upgrade mcp-analysis."
                    )
        return cls(location, db, tables, stored, storage_options)

    # ------------------------------------------------------------------ setup

    def check_embedder(self, name: str, dimension: int | None, *, explicit: bool) -> str:
        """Return the embedder to use; raise if the configured one cannot read this database."""
        stored = self.settings
        if stored is None:
            return name
        if not explicit:
            return stored.embedder
        if stored.embedder != name or (dimension is not None and dimension != stored.vector_dim):
            configured = f"'{name}'" + (f" ({dimension}-dim)" if dimension else "")
            raise DatabaseMismatchError(
                f"The knowledge base at {self.path} was built with embedder '{stored.embedder}' "
                f"({stored.vector_dim}-dim vectors), but the configured embedder is {configured}. "
                f"Use embedder '{stored.embedder}' (unset the `embedder` setting / MCP_ANALYSIS_EMBEDDER), "
                "or build a new knowledge base with the new embedder under another --db path."
            )
        return name

    async def initialize(self, embedder: str, dimension: int) -> None:
        """Create missing tables and the settings row (first ingest)."""
        creators = {
            schema.DOCUMENTS: schema.DOCUMENTS_SCHEMA,
            schema.DOCUMENT_META: schema.DOCUMENT_META_SCHEMA,
            schema.CHUNKS: schema.chunks_schema(dimension),
            schema.DOCUMENT_ITEMS: schema.DOCUMENT_ITEMS_SCHEMA,
            schema.SETTINGS: schema.SETTINGS_SCHEMA,
        }
        for name, table_schema in creators.items():
            if name not in self.tables:
                self.tables[name] = await self.db.create_table(name, schema=table_schema, exist_ok=True)
        if self.settings is None:
            from datetime import UTC, datetime

            self.settings = StoredSettings(
                schema.SCHEMA_VERSION, embedder, dimension, datetime.now(UTC).isoformat(timespec="seconds")
            )
            await self.tables[schema.SETTINGS].add([{"id": "settings", "settings": self.settings.to_json()}])

    @property
    def ready(self) -> bool:
        return all(name in self.tables for name in schema.TABLES) and self.settings is not None

    def table(self, name: str) -> Any:
        return self.tables[name]

    async def ensure_indexes(self, vector_index_min_rows: int = 0) -> None:
        """Full-text index on chunks, scalar indexes on ids, and (for large knowledge bases) an
        HNSW vector index; idempotent. Below `vector_index_min_rows` the exact scan is fast enough
        (about 10 ms at 10k chunks) and exact; above it, it is not (about 45 ms at 100k)."""
        wanted: list[tuple[str, str, Any]] = [
            (schema.CHUNKS, "content_fts", FTS(with_position=True)),
            (schema.CHUNKS, "id", BTree()),
            (schema.CHUNKS, "document_id", BTree()),
            (schema.DOCUMENT_ITEMS, "document_id", BTree()),
            (schema.DOCUMENT_META, "id", BTree()),
            (schema.DOCUMENT_META, "uri", BTree()),
            (schema.DOCUMENTS, "id", BTree()),
        ]
        for table_name, column, config in wanted:
            table = self.tables[table_name]
            existing = {tuple(ix.columns) for ix in await table.list_indices()}
            if (column,) in existing:
                continue
            if await table.count_rows() == 0:
                continue
            await table.create_index(column, config=config, replace=True)
        chunks = self.tables[schema.CHUNKS]
        if vector_index_min_rows and await chunks.count_rows() >= vector_index_min_rows:
            existing = {tuple(ix.columns) for ix in await chunks.list_indices()}
            if ("vector",) not in existing:
                log.info("Building the vector index (HNSW); about 40 s per 100k chunks on 2 cores...")
                await chunks.create_index(
                    "vector", config=HnswSq(distance_type="cosine", num_partitions=1), replace=True
                )

    async def index_names(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for name, table in self.tables.items():
            out[name] = [f"{ix.index_type}({', '.join(ix.columns)})" for ix in await table.list_indices()]
        return out

    async def optimize(self) -> None:
        """Compact files and fold new rows into the indexes (keeps hybrid search fast)."""
        for name in (schema.CHUNKS, schema.DOCUMENT_ITEMS, schema.DOCUMENT_META, schema.DOCUMENTS):
            if name in self.tables:
                await self.tables[name].optimize(cleanup_older_than=_CLEANUP_AFTER)

    # ------------------------------------------------------------------ reads

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
        rows = await query.to_list()
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
        if columns:
            query = query.select(list(columns))
        return await query.to_list()

    async def chunks(self, where: str, columns: Sequence[str] | None = None) -> list[dict[str, Any]]:
        query = self.tables[schema.CHUNKS].query().where(where)
        query = query.select(list(columns or ("id", "document_id", "content", "metadata", "order")))
        return await query.to_list()

    async def counts(self) -> dict[str, int]:
        return {name: await table.count_rows() for name, table in self.tables.items()}

    # ----------------------------------------------------------------- writes

    async def write_documents(self, batch: Sequence[DocumentRows]) -> list[str]:
        """Write a batch atomically per document; return ids of documents they replaced."""
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
        chunks = [row for b in batch for row in b.chunks]
        if chunks:
            await self.tables[schema.CHUNKS].add(
                pa.Table.from_pylist(chunks, schema=await self.tables[schema.CHUNKS].schema())
            )
        # The commit point: one merge makes every document of the batch visible at once.
        meta = pa.Table.from_pylist([b.meta.to_row() for b in batch], schema=schema.DOCUMENT_META_SCHEMA)
        await (
            self.tables[schema.DOCUMENT_META]
            .merge_insert("uri")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute(meta)
        )
        replaced = [m.id for m in old]
        if replaced:
            await self.delete_rows(replaced)
        return replaced

    async def update_meta(self, meta: DocumentMeta) -> None:
        await (
            self.tables[schema.DOCUMENT_META]
            .merge_insert("id")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute(pa.Table.from_pylist([meta.to_row()], schema=schema.DOCUMENT_META_SCHEMA))
        )

    async def delete_document(self, document_id: str) -> None:
        """Hide the document first (meta row), then remove its rows."""
        await self.tables[schema.DOCUMENT_META].delete(f"id = {sql_quote(document_id)}")
        await self.delete_rows([document_id])

    async def delete_rows(self, document_ids: Sequence[str]) -> None:
        if not document_ids:
            return
        await self.tables[schema.CHUNKS].delete(sql_in("document_id", document_ids))
        await self.tables[schema.DOCUMENT_ITEMS].delete(sql_in("document_id", document_ids))
        await self.tables[schema.DOCUMENTS].delete(sql_in("id", document_ids))

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
        for name, column in (
            (schema.DOCUMENTS, "id"),
            (schema.CHUNKS, "document_id"),
            (schema.DOCUMENT_ITEMS, "document_id"),
        ):
            rows = await self.tables[name].query().select([column]).to_arrow()
            present.update(rows.column(column).unique().to_pylist())
        orphans = present - visible
        if settled is not None and orphans:
            orphans &= await self._ids_settled(settled)
        return orphans

    async def _ids_settled(self, settled: timedelta) -> set[str]:
        """Document ids that had rows in a table version at least `settled` old (empty if unknown)."""
        ids: set[str] = set()
        for name, column in (
            (schema.DOCUMENTS, "id"),
            (schema.CHUNKS, "document_id"),
            (schema.DOCUMENT_ITEMS, "document_id"),
        ):
            try:
                table = await self.db.open_table(name)
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
        # Local knowledge bases have one ingest at a time (a lock file); object stores may not.
        orphans = await self.orphan_ids(None if is_local_path(self.path) else ORPHAN_GRACE)
        if orphans:
            log.info("Removing rows of %d unfinished document(s) from an interrupted ingest", len(orphans))
            await self.delete_rows(sorted(orphans))
        return len(orphans)
