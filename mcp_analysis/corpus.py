"""The one way upper layers read documents: a `KnowledgeBase`, viewed through a `Corpus`.

A `Corpus` is the knowledge base seen through one document filter. Search, listing,
the sandbox's /documents tree, MCP resources and citation look-ups all go through
a Corpus, so none of them can forget the filter. Per-id caches (contents, items) are
consistent because the store says whether ids are immutable (`Store.ids_are_immutable`:
in our own databases a changed file gets a new id); when they are not, the caches are
dropped whenever ``document_meta`` changes. Nothing here knows which kind of database
it reads.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import anyio
from cachetools import LRUCache

from mcp_analysis.config import Settings
from mcp_analysis.embed.embedder import TextEmbedder, create_embedder
from mcp_analysis.errors import AnalysisError, DocumentNotFoundError, EmbedderError
from mcp_analysis.search.models import SearchResult
from mcp_analysis.search.passages import search_passages
from mcp_analysis.store.candidates import VisibleDocuments
from mcp_analysis.store.database import Store
from mcp_analysis.store.filters import combine_filters, sql_in
from mcp_analysis.store.models import ChunkRecord, DocumentItem, DocumentMeta
from mcp_analysis.structure import HEADING_LABELS, section_ranges

log = logging.getLogger(__name__)

_VERSION_CHECK_SECONDS = 0.5


class _LRU(LRUCache[str, Any]):
    """A size-bounded cache of documents' texts and items: each entry weighs what `put` says."""

    def __init__(self, max_weight: int) -> None:
        super().__init__(maxsize=max_weight, getsizeof=lambda entry: entry[1])
        self.max_weight = max_weight

    def get(self, key: str, default: Any = None) -> Any | None:  # type: ignore[override]
        entry = super().get(key)
        return default if entry is None else entry[0]

    def put(self, key: str, value: Any, weight: int) -> None:
        """Keep `value`, evicting the least recently used; one heavier than the whole cache is not kept."""
        if weight <= self.max_weight:
            self[key] = (value, weight)


@dataclass
class _FilterView:
    version: int
    docs: dict[str, DocumentMeta]
    order: list[str] = field(default_factory=list)
    position: dict[str, int] = field(default_factory=dict)
    prefilter: VisibleDocuments | None = None  # set on first search (`built`); None = every document passes
    built: bool = False


MAX_QUERY_CHARS = 4000
_READAHEAD_DOCS = 64
_READAHEAD_CHARS = 8 * 1024 * 1024


class KnowledgeBase:
    """An opened knowledge base: store, embedder and shared caches."""

    def __init__(
        self, settings: Settings, store: Store, embedder_name: str, embedder_base_url: str | None = None
    ) -> None:
        self.settings = settings
        self.store = store
        self.embedder_name = embedder_name
        self.embedder_base_url = embedder_base_url
        self._embedder: TextEmbedder | None = None
        self._embedder_lock = anyio.Lock()
        self._views: dict[str | None, _FilterView] = {}
        self._version = -1
        self._version_checked = 0.0
        self._content = _LRU(64 * 1024 * 1024)
        self._items = _LRU(64 * 1024 * 1024)
        self.search_slots = anyio.Semaphore(settings.search.max_concurrent)  # concurrent searches (more collapse)
        #: Set by the first search: a start-up warm-up search after it would only compete with it.
        self.searched = False
        self._tables: Any = None

    @property
    def tables(self) -> Any:
        """The documents' tables (corpus_tables.TableReader; its readers load on first use)."""
        if self._tables is None:
            from mcp_analysis.corpus_tables import TableReader

            self._tables = TableReader(self.store)
        return self._tables

    @classmethod
    async def open(
        cls,
        settings: Settings,
        *,
        create: bool = False,
        read_consistency: timedelta | None = timedelta(seconds=1),
    ) -> KnowledgeBase:
        store = await Store.open(
            settings.db,
            create=create,
            read_consistency=read_consistency,
            storage_options=settings.storage_options,
        )
        choice = store.query_embedder(
            settings.embedder,
            explicit="embedder" in settings.model_fields_set,
            base_url=settings.embedder_base_url,
        )
        return cls(settings, store, choice.name, choice.base_url)

    def storage_errors(self) -> AbstractContextManager[None]:
        """An object store that fails (down, unreachable) is a clear, retryable error, not a crash."""
        return self.store.storage_errors()

    # ---------------------------------------------------------------- embedder

    async def embedder(self) -> TextEmbedder:
        """The embedder, created (and for the local model, loaded) on first use."""
        if self._embedder is None:
            async with self._embedder_lock:
                if self._embedder is None:
                    try:
                        embedder = create_embedder(self.embedder_name, base_url=self.embedder_base_url)
                        if self.store.settings is not None and embedder.dimension is None:
                            embedder.dimension = self.store.settings.vector_dim
                        await anyio.to_thread.run_sync(embedder.warm_up)
                    except EmbedderError as exc:
                        raise self.embedder_unavailable(exc) from None
                    self._embedder = embedder
        return self._embedder

    def embedder_unavailable(self, exc: EmbedderError) -> EmbedderError:
        """The store's account of why queries cannot be embedded here (it may offer keyword-only search)."""
        return self.store.embedder_failure(exc, self.embedder_name)

    # ---------------------------------------------------------- document index

    async def _current_version(self) -> int:
        now = time.monotonic()
        if now - self._version_checked >= _VERSION_CHECK_SECONDS or self._version < 0:
            version = await self.store.meta_version()
            if not self.store.ids_are_immutable and 0 <= self._version != version:
                # A document may have been rewritten under the same id: per-id caches are stale now.
                await self.store.catch_up()
                self._content = _LRU(self._content.max_weight)
                self._items = _LRU(self._items.max_weight)
            self._version = version
            self._version_checked = now
        return self._version

    async def refresh(self, *, latest: bool = False) -> int:
        """Force a re-read of the document list (e.g. after an ingest in this process). `latest`: a
        commit just made through another handle (this process's watcher) is read now, not once
        LanceDB's read-consistency interval has passed."""
        self._version_checked = 0.0
        await self.store.refresh_tables()  # another process may have created the tables since we opened
        if latest:
            with self.storage_errors():
                await self.store.read_latest()
        return await self._current_version()

    async def visible(self, document_filter: str | None) -> dict[str, DocumentMeta]:
        """id -> metadata of the documents a filter lets through (cached per table version)."""
        with self.storage_errors():
            version = await self._current_version()
        view = self._views.get(document_filter)
        if view is None or view.version != version:
            with self.storage_errors():
                metas = await self.store.all_meta(document_filter)
            metas.sort(key=lambda m: (m.created_at, m.title, m.id))
            order = [m.id for m in metas]
            view = _FilterView(version, {m.id: m for m in metas}, order, {d: i for i, d in enumerate(order)})
            if len(self._views) > 256:
                self._views.clear()
            self._views[document_filter] = view
        return view.docs

    async def prefilter(self, document_filter: str | None) -> VisibleDocuments | None:
        """The documents a filtered view passes, as the store's search prefilter (it builds the
        expression from the ids), None when every document passes; one object per table version:
        the store builds the expression of thousands of ids once per object."""
        if document_filter is None:
            return None
        visible = await self.visible(document_filter)
        view = self._views[document_filter]
        if not view.built:
            everything = await self.visible(None)
            if len(visible) < len(everything):
                view.prefilter = VisibleDocuments.of(visible, everything.keys() - visible.keys())
            view.built = True
        return view.prefilter

    def corpus(self, document_filter: str | None = None) -> Corpus:
        """A filtered view. The filter must already be validated (see `open_corpus`)."""
        return Corpus(self, document_filter)

    async def open_corpus(self, *filters: str | None) -> Corpus:
        """Validate each filter, AND them, and return the view."""
        checked = [await self.store.validate_filter(f) for f in filters]
        return Corpus(self, combine_filters(*checked))

    # ------------------------------------------------------------------ content

    def _readahead(self, document_id: str, document_filter: str | None, cache: _LRU) -> list[str]:
        """The document plus the next uncached ones in listing order, within a size budget.

        Code that reads one file usually reads the next document's too (a scan); one
        query for 64 documents costs about what one query for one does.
        """
        view = self._views.get(document_filter)
        if view is None or document_id not in view.position:
            return [document_id]
        batch = [document_id]
        budget = view.docs[document_id].content_size
        for other in view.order[view.position[document_id] + 1 :]:
            if len(batch) >= _READAHEAD_DOCS or budget > _READAHEAD_CHARS:
                break
            if cache.get(other) is None:
                batch.append(other)
                budget += view.docs[other].content_size
        return batch

    async def content(self, document_id: str, document_filter: str | None = None) -> str:
        cached = self._content.get(document_id)
        if cached is None:
            batch = self._readahead(document_id, document_filter, self._content)
            with self.storage_errors():
                rows = await self.store.documents_content(batch)
            for doc_id, text in rows.items():
                self._content.put(doc_id, text, len(text))
            cached = rows.get(document_id, "")
        return cached

    async def items(self, document_id: str, document_filter: str | None = None) -> list[DocumentItem]:
        cached = self._items.get(document_id)
        if cached is None:
            batch = self._readahead(document_id, document_filter, self._items)
            grouped: dict[str, list[DocumentItem]] = {doc_id: [] for doc_id in batch}
            with self.storage_errors():
                rows = await self.store.items(sql_in("document_id", batch))
            for row in rows:
                grouped[row["document_id"]].append(DocumentItem.from_row(row))
            for doc_id, items in grouped.items():
                items.sort(key=lambda i: i.position)
                self._items.put(doc_id, items, sum(len(i.text) + 64 for i in items))
            cached = grouped[document_id]
        return cached

    async def close(self) -> None:
        self.store.close()


class Corpus:
    """The knowledge base as seen through one document filter."""

    def __init__(self, kb: KnowledgeBase, document_filter: str | None) -> None:
        self.kb = kb
        self.filter = document_filter

    async def documents(self) -> list[DocumentMeta]:
        return list((await self.kb.visible(self.filter)).values())

    async def count(self) -> int:
        return len(await self.kb.visible(self.filter))

    async def find(self, document_id: str) -> DocumentMeta | None:
        return (await self.kb.visible(self.filter)).get(document_id)

    async def get(self, document_id: str) -> DocumentMeta:
        meta = await self.find(document_id)
        if meta is None:
            raise DocumentNotFoundError(
                f"No document with id {document_id!r} is visible here. Use list_documents to see valid ids."
            )
        return meta

    async def content(self, document_id: str) -> str:
        await self.get(document_id)
        return await self.kb.content(document_id, self.filter)

    async def items(self, document_id: str) -> list[DocumentItem]:
        await self.get(document_id)
        return await self.kb.items(document_id, self.filter)

    async def items_jsonl(self, document_id: str) -> str:
        items = await self.items(document_id)
        return "".join(json.dumps(it.model_dump(exclude={"document_id"}), ensure_ascii=False) + "\n" for it in items)

    async def table_counts(self) -> dict[str, int]:
        """id -> number of tables of every visible document (cheap: metadata or one query)."""
        return await self.kb.tables.counts(await self.documents())

    async def tables(self, document_id: str) -> list[dict[str, Any]]:
        """tables.json of a visible document."""
        meta = await self.get(document_id)
        return await self.kb.tables.entries(meta, await self.kb.items(document_id, self.filter))

    async def table_csv(self, document_id: str, index: int, max_chars: int) -> str:
        """Every row of one table of a visible document, as CSV (TableTooLargeError past `max_chars`,
        before it is decompressed)."""
        meta = await self.get(document_id)
        text = await self.kb.tables.csv(meta, index, await self.kb.items(document_id, self.filter), max_chars)
        if text is None:
            raise DocumentNotFoundError(f"Document {document_id} has no table {index}; its tables.json lists them.")
        return text

    async def table_size(self, document_id: str, index: int) -> int | None:
        """The size in bytes of one table's CSV, without reading its rows (None when unknown)."""
        meta = await self.get(document_id)
        return await self.kb.tables.size(meta, index, await self.kb.items(document_id, self.filter))

    async def toc(self, document_id: str) -> dict[str, Any]:
        """The section tree: each heading with its item range and the chunk ids inside it."""
        meta = await self.get(document_id)
        items = await self.kb.items(document_id, self.filter)
        return build_toc(meta, items)

    async def search(self, query: str, limit: int | None = None) -> list[SearchResult]:
        query = (query or "").strip()
        if not query:
            raise AnalysisError("search needs a non-empty query.")
        if len(query) > MAX_QUERY_CHARS:
            raise AnalysisError(
                f"The query is {len(query)} characters; the limit is {MAX_QUERY_CHARS}. Search with key words or "
                "a question, not a whole document."
            )
        settings = self.kb.settings.search
        limit = settings.limit if limit is None else limit
        if not 1 <= limit <= settings.max_limit:
            raise AnalysisError(f"limit must be between 1 and {settings.max_limit}, got {limit}.")
        visible = await self.kb.visible(self.filter)
        if not visible:
            return []
        self.kb.searched = True
        prefilter = await self.kb.prefilter(self.filter)  # the store scales ef by what it passes (`ViewPlan.ef`)
        self.kb.store.check_searchable()
        vector = None
        if settings.mode != "keyword":
            embedder = await self.kb.embedder()
            try:
                vector = await embedder.embed_query(query)
            except EmbedderError as exc:
                raise self.kb.embedder_unavailable(exc) from None
        async with self.kb.search_slots:
            with self.kb.storage_errors():
                return await search_passages(self.kb.store, vector, query, limit, prefilter, visible, settings)

    async def chunks(self, chunk_ids: Iterable[str]) -> list[tuple[ChunkRecord, DocumentMeta]]:
        """Chunks by id, only those of visible documents."""
        ids = list(dict.fromkeys(chunk_ids))
        if not ids:
            return []
        visible = await self.kb.visible(self.filter)
        with self.kb.storage_errors():
            rows = await self.kb.store.chunks(sql_in("id", ids))
        out = []
        for row in rows:
            meta = visible.get(row["document_id"])
            if meta is not None:
                out.append((ChunkRecord.from_row(row), meta))
        return out


def build_toc(meta: DocumentMeta, items: list[DocumentItem]) -> dict[str, Any]:
    """The section tree of a document: headings with item ranges, pages and chunk ids."""
    ranges = section_ranges([i.label for i in items], [i.heading_level for i in items])
    root: dict[str, Any] = {"document_id": meta.id, "title": meta.title, "sections": []}
    stack: list[tuple[int, dict[str, Any]]] = []
    for index, item in enumerate(items):
        if item.label not in HEADING_LABELS:
            continue
        start, end = ranges[index]
        inside = items[start : end + 1]
        level = item.heading_level if item.heading_level is not None else 1
        node: dict[str, Any] = {
            "heading": item.text,
            "level": level,
            "self_ref": item.self_ref,
            "item_range": [start, end],
            "page_numbers": sorted({p for it in inside for p in it.page_numbers}),
            "chunk_ids": list(dict.fromkeys(c for it in inside for c in it.chunk_ids)),
            "sections": [],
        }
        while stack and stack[-1][0] >= level:
            stack.pop()
        (stack[-1][1]["sections"] if stack else root["sections"]).append(node)
        stack.append((level, node))
    return root
