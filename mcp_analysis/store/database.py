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
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
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
    ReadOnlyDatabaseError,
    StorageUnavailableError,
    storage_error_message,
)
from mcp_analysis.store import haiku, schema
from mcp_analysis.store.filters import filter_error_from, normalize_filter, sql_in, sql_quote
from mcp_analysis.store.models import DocumentMeta

log = logging.getLogger(__name__)

_CLEANUP_AFTER = timedelta(minutes=30)  # never 0: concurrent readers still use old versions
# Where a document's rows are, besides its meta row: (table, column holding the document id).
_DOCUMENT_ID_COLUMNS = (
    (schema.DOCUMENTS, "id"),
    (schema.CHUNKS, "document_id"),
    (schema.DOCUMENT_ITEMS, "document_id"),
)


@dataclass
class StoredSettings:
    """The settings row: which embedder built the vectors, and who wrote the database.

    ``origin`` is "mcp-analysis" (our own, ``schema_version`` >= 1) or "haiku.rag"
    (``origin_version`` is haiku.rag's version string; ``embedder`` is
    "provider:name" as haiku.rag recorded it).
    """

    schema_version: int
    embedder: str
    vector_dim: int
    created_at: str = ""
    origin: str = "mcp-analysis"
    origin_version: str = ""

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
    def from_json(cls, text: str, location: str = "the knowledge base") -> StoredSettings:
        """Parse the row, telling ours from haiku.rag's explicitly (never by guessing)."""
        try:
            data = json.loads(text)
        except (TypeError, json.JSONDecodeError):
            data = None
        if isinstance(data, dict) and data.get("app") == "mcp-analysis":
            emb = data.get("embeddings") or {}
            try:
                return cls(
                    schema_version=int(data.get("version", 0)),
                    embedder=str(emb.get("model", "")),
                    vector_dim=int(emb.get("vector_dim", 0)),
                    created_at=str(data.get("created_at", "")),
                )
            except (TypeError, ValueError):
                pass
        elif isinstance(data, dict) and haiku.is_haiku_settings(data):
            record = haiku.embedder_of(data, location)
            return cls(
                schema_version=0,
                embedder=f"{record.provider}:{record.name}",
                vector_dim=record.vector_dim,
                origin=haiku.ORIGIN,
                origin_version=str(data["version"]),
            )
        shown = str(text)[:160].replace("\n", " ")
        raise DatabaseMismatchError(
            f"{location} has a settings row that neither mcp-analysis nor haiku.rag wrote ({shown!r}). "
            f"mcp-analysis reads its own knowledge bases (schema version <= {schema.SCHEMA_VERSION}) and "
            f"{haiku.SUPPORTED}."
        )

    @property
    def foreign(self) -> bool:
        return self.origin != "mcp-analysis"


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


@contextmanager
def storage_errors(location: str, kinds: tuple[type[Exception], ...] = (OSError, RuntimeError)) -> Iterator[None]:
    """On object storage, a store that fails (down, unreachable) is a clear, retryable error, not a crash."""
    try:
        yield
    except kinds as exc:
        if is_local_path(location):
            raise
        raise StorageUnavailableError(storage_error_message(location, exc)) from exc


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
        layout: haiku.HaikuLayout | None = None,
        storage_options: dict[str, str] | None = None,
    ) -> None:
        self.path = path
        self.db = db
        self.tables = tables
        self.settings = settings
        self.storage_options = storage_options
        self.haiku = layout  # set for a haiku.rag database: read-time adapter, and read-only

    @property
    def read_only(self) -> bool:
        return self.haiku is not None

    def check_writable(self) -> None:
        """Raise before anything is written to a database we only read (haiku.rag's)."""
        if self.haiku is not None:
            raise ReadOnlyDatabaseError(
                f"{self.path} is a {self.haiku.describe()}; mcp-analysis serves it read-only and never writes "
                f"to it. Add or remove its documents with haiku.rag (e.g. `haiku-rag add-src PATH --db {self.path}`, "
                f"`haiku-rag delete ID --db {self.path}`); a running server picks the changes up by itself."
            )

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
        with storage_errors(location, (OSError, RuntimeError, ValueError)):
            return await cls._open(location, create, read_consistency, storage_options)

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
                f"{location} holds no knowledge base tables{_found(location)}. mcp-analysis serves its own "
                f"knowledge bases and {haiku.SUPPORTED}. Add documents with `mcp-analysis add PATH --db {location}`."
            )
        stored, layout = await _identify(location, tables, create)
        return cls(location, db, tables, stored, layout, storage_options)

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
        self.check_writable()
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
        self.check_writable()
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
        self.check_writable()
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
        if self.haiku is not None and schema.DOCUMENTS in self.tables:
            sizes = await self.haiku.content_sizes(self.tables[schema.DOCUMENTS])
            rows = [{**r, "content_size": sizes.get(r["id"], 0)} for r in rows]
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
        if self.haiku is not None:
            # Their rows lack chunk_ids (derived) and hold page_numbers as JSON text (parsed).
            derive = not columns or "chunk_ids" in columns
            wanted = [c for c in columns or () if c != "chunk_ids"]
            if wanted:
                extra = [c for c in ("document_id", "self_ref") if derive and c not in wanted]
                query = query.select(wanted + extra)
            rows = await query.to_list()
            return await self.haiku.items(
                rows, self.tables[schema.DOCUMENT_ITEMS], self.tables[schema.CHUNKS], chunk_ids=derive
            )
        if columns:
            query = query.select(list(columns))
        return await query.to_list()

    async def chunks(self, where: str, columns: Sequence[str] | None = None) -> list[dict[str, Any]]:
        query = self.tables[schema.CHUNKS].query().where(where)
        query = query.select(list(columns or ("id", "document_id", "content", "metadata", "order")))
        return await self.complete_chunks(await query.to_list())

    async def complete_chunks(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Chunk rows as our layers read them (haiku.rag's lack the item ranges context expansion uses)."""
        if self.haiku is None or not rows or "metadata" not in rows[0]:
            return rows
        return await self.haiku.chunks(rows, self.tables[schema.DOCUMENT_ITEMS], self.tables[schema.CHUNKS])

    async def counts(self) -> dict[str, int]:
        return {name: await table.count_rows() for name, table in self.tables.items()}

    # ----------------------------------------------------------------- writes

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
        self.check_writable()
        await (
            self.tables[schema.DOCUMENT_META]
            .merge_insert("id")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute(pa.Table.from_pylist([meta.to_row()], schema=schema.DOCUMENT_META_SCHEMA))
        )

    async def delete_document(self, document_id: str) -> None:
        """Hide the document first (meta row), then remove its rows."""
        self.check_writable()
        await self.tables[schema.DOCUMENT_META].delete(f"id = {sql_quote(document_id)}")
        await self.delete_rows([document_id])

    async def delete_rows(self, document_ids: Sequence[str]) -> None:
        self.check_writable()
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
        for name, column in _DOCUMENT_ID_COLUMNS:
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
        self.check_writable()
        # Local knowledge bases have one ingest at a time (a lock file); object stores may not.
        orphans = await self.orphan_ids(None if is_local_path(self.path) else ORPHAN_GRACE)
        if orphans:
            log.info("Removing rows of %d unfinished document(s) from an interrupted ingest", len(orphans))
            await self.delete_rows(sorted(orphans))
        return len(orphans)


def _found(location: str) -> str:
    """A short account of what a local directory holds instead of tables (for error messages)."""
    if not is_local_path(location) or not Path(location).is_dir():
        return ""
    entries = sorted(p.name + ("/" if p.is_dir() else "") for p in Path(location).iterdir())
    if not entries:
        return " (the directory is empty)"
    shown = ", ".join(entries[:6]) + (f", ... ({len(entries)} entries)" if len(entries) > 6 else "")
    return f" (found: {shown})"


async def _identify(
    location: str, tables: dict[str, Any], create: bool
) -> tuple[StoredSettings | None, haiku.HaikuLayout | None]:
    """Who wrote this database (from its settings row, explicitly), and can we read it?"""
    stored = None
    if schema.SETTINGS in tables:
        rows = await tables[schema.SETTINGS].query().limit(1).to_list()
        if rows:
            stored = StoredSettings.from_json(rows[0].get("settings") or "", location)
    schemas = {name: await table.schema() for name, table in tables.items()}
    if stored is None and haiku.looks_like_haiku({n: sc.names for n, sc in schemas.items()}):
        raise DatabaseMismatchError(
            f"{location} has haiku.rag's tables but no settings row, so the embedder that built it is unknown. "
            f"Rebuild it with haiku.rag (`haiku-rag rebuild --db {location}`); mcp-analysis reads {haiku.SUPPORTED}."
        )
    if stored is not None and stored.foreign:
        haiku.check_version(stored.origin_version, location)
        haiku.check_tables(location, stored.origin_version, tables, schemas, stored.vector_dim)
        provider, _, name = stored.embedder.partition(":")
        indexed = {tuple(ix.columns) for ix in await tables[schema.CHUNKS].list_indices()}
        layout = haiku.HaikuLayout(
            stored.origin_version,
            haiku.HaikuEmbedder(provider, name, stored.vector_dim),
            has_fts=("content_fts",) in indexed,
        )
        if create:
            Store(location, None, tables, stored, layout).check_writable()
        if not layout.has_fts:
            log.warning("%s has no full-text index on chunks.content_fts; search will be refused.", location)
        return stored, layout
    missing_core = {schema.DOCUMENT_META, schema.SETTINGS} - tables.keys()
    if tables and missing_core and not create:
        raise DatabaseMismatchError(
            f"{location} is not an mcp-analysis or haiku.rag knowledge base (it has the tables "
            f"{', '.join(sorted(tables))} but not {', '.join(sorted(missing_core))})."
        )
    if stored is not None and stored.schema_version > schema.SCHEMA_VERSION:
        raise DatabaseMismatchError(
            f"{location} uses schema version {stored.schema_version}; this mcp-analysis understands "
            f"up to {schema.SCHEMA_VERSION}. Upgrade mcp-analysis."
        )
    return stored, None
