"""`mcp-analysis add`: files and directories into the knowledge base.

- Re-adding a file whose bytes did not change is a no-op (its sha256 is stored);
  changed bytes replace the document (it gets a new id, the old rows go). A file met at a
  new path with the bytes of a document whose file is gone is that document moved (moves.py).
- Each file is read once and converted from those bytes in a conversion worker process
  (pool.py) under per-file bounds (size, time, memory, items, depth): the stored text always
  matches the stored hash, and no file can hang or exhaust the ingest.
- Documents are written in batches; each batch becomes visible in one commit, so a
  killed ingest leaves nothing half-written and re-running it completes the work.
- Unsupported, unreadable or over-bound files, and entries that are not regular files, are
  reported under the name they were given and skipped; the others go in.
- One ingest at a time per knowledge base (a lock file), which also makes it safe
  to clean up rows an interrupted ingest left behind.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import anyio

from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.errors import IngestError, SecretFileError
from mcp_analysis.ingest.excluded import Excluded
from mcp_analysis.ingest.files import Confinement, display_name
from mcp_analysis.ingest.lock import ingest_lock
from mcp_analysis.ingest.moves import MovedFiles
from mcp_analysis.ingest.own_files import excluded_paths
from mcp_analysis.ingest.pool import ConversionPool, ConversionWorker
from mcp_analysis.ingest.prepare import PreparedFile
from mcp_analysis.ingest.rows import PreparedDocument, document_rows
from mcp_analysis.ingest.sources import SourcePath, collect_sources, is_object_uri, refusal, source_uri
from mcp_analysis.paths import resolve_links
from mcp_analysis.store.models import DocumentMeta
from mcp_analysis.store.writes import DocumentRows

log = logging.getLogger(__name__)

# A folder's file read as something else than what the walk found (its name swapped for a link).
_REPLACED = "it was replaced while it was read (saved again, or swapped for a symbolic link): add it again"
_CHUNKS_PER_FLUSH = 512
# During a long ingest, fold new rows into the indexes this often, so servers reading the
# knowledge base meanwhile do not search a growing unindexed tail.
_CHUNKS_PER_OPTIMIZE = 5000


class ProgressSink(Protocol):
    def start(self, total: int) -> None: ...
    def advance(self, label: str) -> None: ...
    def phase(self, label: str) -> None: ...  # a slow step between files (embedding, indexing)
    def finish(self) -> None: ...


@dataclass
class IngestReport:
    added: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    metadata_updated: list[str] = field(default_factory=list)
    moved: list[tuple[str, str]] = field(default_factory=list)  # (old uri, new uri): same id, nothing re-read
    unchanged: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    secrets: list[str] = field(default_factory=list)  # uris of skipped files that are secrets (a private key)
    warnings: list[tuple[str, str]] = field(default_factory=list)  # parts of added files left out
    chunks: int = 0
    #: The knowledge base's documents once this add was written: as it read them under its lock, its own
    #: writes applied. A caller going on from there (a folder watcher, for its deletions) need not read again.
    documents: list[DocumentMeta] = field(default_factory=list, repr=False)

    def summary(self) -> str:
        parts = [
            f"{len(self.added)} added",
            f"{len(self.replaced)} replaced",
            f"{len(self.unchanged)} unchanged",
        ]
        if self.metadata_updated:
            parts.append(f"{len(self.metadata_updated)} metadata updated")
        if self.moved:
            parts.append(f"{len(self.moved)} moved")
        parts.append(f"{len(self.skipped)} skipped")
        return ", ".join(parts) + f" ({self.chunks} chunks written)"


def _names(path: SourcePath) -> int:
    """How many names (hard links) the file at `path` has; 1 for an object or a file gone."""
    if not isinstance(path, Path):
        return 1
    try:
        return path.lstat().st_nlink
    except OSError:
        return 1


def _folders_of(paths: Sequence[Path]) -> list[Path]:
    """The folders added, resolved (a file's: its folder; a path that is not there: none), where
    `add` looks for moved files' documents (and in their subfolders)."""
    resolved = [Path(resolve_links(Path(p).expanduser())) for p in paths]
    return list(dict.fromkeys(p if p.is_dir() else p.parent for p in resolved if os.path.lexists(p)))


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _document(
    path: SourcePath,
    uri: str,
    digest: str,
    prepared: PreparedFile,
    title: str | None,
    metadata: dict[str, Any],
    existing: DocumentMeta | None,
) -> PreparedDocument:
    now = _now()
    meta = DocumentMeta(
        id=str(uuid.uuid4()),
        uri=uri,
        title=title or prepared.title,
        # A changed file keeps the metadata given earlier (--meta); new values win. What ingest records
        # itself comes from this conversion only: a page title the new version dropped is gone.
        metadata={
            **(existing.user_metadata() if existing else {}),
            **prepared.metadata,
            "format": prepared.format,
            "file_name": display_name(path.name),
            **metadata,
        },
        created_at=existing.created_at if existing else now,
        updated_at=now,
        content_hash=digest,
        content_size=len(prepared.content.encode("utf-8")),
    )
    return PreparedDocument(
        path,
        meta,
        prepared.content,
        prepared.docling_json,
        prepared.items,
        prepared.chunks,
        existing is not None,
        prepared.tables,
    )


class Ingestor:
    """Adds files to one knowledge base."""

    def __init__(
        self,
        kb: KnowledgeBase,
        progress: ProgressSink | None = None,
        pool: ConversionPool | None = None,
        moves_within: Sequence[Path] | None = None,
        before_write: Callable[[], Awaitable[None]] | None = None,
        defer_optimize: bool = False,
    ) -> None:
        """`pool`: conversion workers to use and keep (a long-lived caller such as a folder watcher
        passes one, so workers outlive one add); by default each add starts its own and ends them.
        `moves_within`: only documents whose file lay in these folders may be found moved (a folder
        watcher's own folders); by default, the folders added (a file's: its folder).
        `before_write`: awaited before each batch is written; it raises to stop the add (a folder
        watcher whose lease on an object-store knowledge base is gone).
        `defer_optimize`: an add makes missing indexes but leaves compaction to the caller (a
        watcher, when idle), unless it wrote `_CHUNKS_PER_OPTIMIZE` chunks."""
        self.kb = kb
        self.defer_optimize = defer_optimize
        self.progress = progress
        self.pool = pool
        self.moves_within = moves_within
        self.before_write = before_write
        self.limits = pool.limits if pool is not None else kb.settings.ingest.limits()
        self._confined = Confinement()  # of the add running
        self._excluded = Excluded()

    async def add(
        self, paths: Sequence[Path | str], *, title: str | None = None, metadata: dict[str, Any] | None = None
    ) -> IngestReport:
        """`paths`: files, folders, and object-store uris (sources.py)."""
        self._excluded = excluded_paths(self.kb.settings, self.kb.store.path)
        files, skipped = collect_sources(paths, self._excluded, self.kb.store.path)
        if title and len(files) != 1:
            raise IngestError(f"--title applies to exactly one file, but {len(files)} files were given.")
        report = IngestReport(skipped=list(skipped))
        if self.progress:
            self.progress.start(len(files))
        pool = self.pool or ConversionPool(self.limits, self.kb.settings.ingest.chunk_tokens)
        try:
            if files:
                pool.start()
                if not self.kb.store.ready:
                    pool.warm()  # every file is new here: the parsers load while the embedding model does
            local = [Path(p) for p in paths if not is_object_uri(p)]
            within = self.moves_within or _folders_of(local)
            self._confined = Confinement.of(local, self.moves_within)
            await self._add(files, title, metadata or {}, report, pool, within)
        finally:
            if pool is not self.pool:
                pool.close()
            if self.progress:
                self.progress.finish()
        await self.kb.refresh()
        return report

    async def _add(
        self,
        files: list[SourcePath],
        title: str | None,
        metadata: dict[str, Any],
        report: IngestReport,
        pool: ConversionPool,
        within: Sequence[Path],
    ) -> None:
        store = self.kb.store
        store.check_writable()  # before the lock file: a database we only read stays byte-identical
        async with ingest_lock(store.path):
            if not store.ready:
                self._phase("loading the embedding model")
                embedder = await self.kb.embedder()
                dimension = embedder.dimension or len(await embedder.embed_query("dimension probe"))
                await store.initialize(embedder.name, dimension)
            else:
                await store.remove_orphans()
            stored = await store.all_meta()
            by_uri = {m.uri: m for m in stored}  # each file's outcome applied by `_one`: report.documents
            moves = MovedFiles(stored, within)
            pending: list[PreparedDocument] = []
            optimized_at = 0
            for path in files:
                if self.progress:
                    self.progress.advance(display_name(path.name))
                prepared = await self._one(path, title, metadata, by_uri, moves, report, pool)
                if prepared is None:
                    continue
                pending.append(prepared)
                if (
                    len(pending) >= self.kb.settings.ingest.batch_documents
                    or sum(len(p.chunks) for p in pending) >= _CHUNKS_PER_FLUSH
                ):
                    await self._flush(pending, report, moves)
                    pending = []
                    if report.chunks - optimized_at >= _CHUNKS_PER_OPTIMIZE:
                        await self._update_indexes()
                        optimized_at = report.chunks
            await self._flush(pending, report, moves)
            report.documents = list(by_uri.values())
            await self._finish(report)
            if report.added or report.replaced:
                self._phase("updating the indexes")
                await self._update_indexes(compact=not self.defer_optimize or report.chunks >= _CHUNKS_PER_OPTIMIZE)

    async def _update_indexes(self, compact: bool = True) -> None:
        """Fold the rows written so far into the indexes (made when missing). Without `compact`,
        only missing indexes are made: full-text and vector search read unindexed rows too."""
        await self.kb.store.ensure_indexes(self.kb.settings.search.vector_index_min_rows)
        if compact:
            await self.kb.store.optimize(self.kb.settings.search.vector_index_max_segments)

    def _phase(self, label: str) -> None:
        if self.progress:
            self.progress.phase(label)

    async def _one(
        self,
        path: SourcePath,
        title: str | None,
        metadata: dict[str, Any],
        by_uri: dict[str, DocumentMeta],
        moves: MovedFiles,
        report: IngestReport,
        pool: ConversionPool,
    ) -> PreparedDocument | None:
        """Read, check and convert one file; None when there is nothing to write (reported why)."""
        name = display_name(path)
        reason = refusal(path)
        if reason is not None:
            report.skipped.append((name, reason))
            return None
        try:
            uri = source_uri(path)  # an IngestError when its name keeps changing between a link and a file
            existing = by_uri.get(uri)
            if not self._confined.stays_inside(path, uri):
                raise IngestError(_REPLACED)
            digest, prepared, moved = await self._convert(pool, path, existing, moves)
        except IngestError as exc:
            report.skipped.append((name, str(exc)))
            if isinstance(exc, SecretFileError):
                report.secrets.append(uri)
            return None
        if moved is not None:  # the bytes of a stored document whose file is gone: moved here
            # Its old path, should it come back later in this add, is a new document, not this one;
            # one this add already wrote there (its file changed, then went) stays listed.
            if by_uri.get(moved.uri) is moved:
                del by_uri[moved.uri]
            by_uri[uri] = moves.relocate(moved, path, uri, title, metadata)  # written before the next batch
            report.moved.append((moved.uri, uri))
            return None
        if prepared is None:  # the same bytes as stored
            by_uri[uri] = await self._update_metadata(existing, title, metadata, report)  # type: ignore[arg-type]
            return None
        report.warnings.extend((name, note) for note in prepared.warnings)
        document = _document(path, uri, digest, prepared, title, metadata, existing)
        by_uri[uri] = document.meta  # written with its batch (each uri comes once per add: collect_sources)
        return document

    async def _convert(
        self, pool: ConversionPool, path: SourcePath, existing: DocumentMeta | None, moves: MovedFiles
    ) -> tuple[str, PreparedFile | None, DocumentMeta | None]:
        """`_read_and_convert` on one of `pool`'s workers (another engine converts elsewhere)."""
        with pool.worker() as worker:
            return await self._read_and_convert(worker, path, existing, moves)

    async def _read_and_convert(
        self, worker: ConversionWorker, path: SourcePath, existing: DocumentMeta | None, moves: MovedFiles
    ) -> tuple[str, PreparedFile | None, DocumentMeta | None]:
        """The sha256 of the bytes read, what they convert to (None when `existing` has that hash
        or they are a moved document's), and the moved document."""
        read = await anyio.to_thread.run_sync(
            worker.read, os.fspath(path), display_name(path.name), abandon_on_cancel=True
        )
        if not self._confined.holds(path, read.signature):
            worker.drop()  # swapped for a link (or another file) since the folder was walked
            raise IngestError(_REPLACED)
        signature = read.signature  # the server's own file under another name? (lists its folders: a thread)
        why = await anyio.to_thread.run_sync(
            lambda: self._excluded.same_file_as(signature.device, signature.inode, _names(path))
        )
        if why is not None:
            worker.drop()  # a hard link to the server's own file: the same file under another name
            raise IngestError(f"it is {why}, under another name (a hard link), never added as a document")
        if existing is not None and existing.content_hash == read.digest:
            worker.drop()
            return read.digest, None, None
        moved = None
        if existing is None:
            moved = await anyio.to_thread.run_sync(moves.claim, read.digest, path, abandon_on_cancel=True)
        if moved is not None:
            worker.drop()
            return read.digest, None, moved
        prepared = await anyio.to_thread.run_sync(worker.convert, abandon_on_cancel=True)
        return read.digest, prepared, None

    async def _finish(self, report: IngestReport) -> None:
        """After the last batch, under the lock: an engine that defers its commits makes them here."""

    async def _save_meta(self, *metas: DocumentMeta) -> None:
        """Rewrite stored documents' metadata rows (moved, or given new metadata), in one commit."""
        await self.kb.store.update_meta(*metas)

    async def _embed(self, texts: list[str]) -> Any:
        """The vectors of `texts`, in order (an array of shape (len(texts), dimension))."""
        return await (await self.kb.embedder()).embed_documents(texts)

    async def _update_metadata(
        self, existing: DocumentMeta, title: str | None, metadata: dict[str, Any], report: IngestReport
    ) -> DocumentMeta:
        merged = {**existing.metadata, **metadata}
        new_title = title or existing.title
        if new_title != existing.title or merged != existing.metadata:
            updated = existing.model_copy(update={"title": new_title, "metadata": merged, "updated_at": _now()})
            await self._save_meta(updated)
            report.metadata_updated.append(existing.uri)
            return updated
        report.unchanged.append(existing.uri)
        return existing

    async def _flush(self, pending: list[PreparedDocument], report: IngestReport, moves: MovedFiles) -> None:
        """Commit the moves found so far, in one commit, then write `pending`: a batch replaces
        documents by uri, and a moved document's old uri may be one of its files again."""
        if self.before_write is not None:
            await self.before_write()
        await self._save_meta(*moves.take())  # an ingest killed before this finds them moved again
        if not pending:
            return
        texts = [chunk.embedding_text for p in pending for chunk in p.chunks]
        self._phase(f"embedding and writing {len(texts)} chunks of {len(pending)} documents")
        vectors = await self._embed(texts)
        batch: list[DocumentRows] = []
        cursor = 0
        for prepared in pending:
            batch.append(document_rows(prepared, vectors[cursor : cursor + len(prepared.chunks)]))
            cursor += len(prepared.chunks)
        if self.before_write is not None:  # again: embedding took seconds, a lease may have gone meanwhile
            await self.before_write()
        await self.kb.store.write_documents(batch)
        written(pending, report)


def written(pending: list[PreparedDocument], report: IngestReport) -> None:
    """`pending`, committed, in the report."""
    for prepared in pending:
        (report.replaced if prepared.replacing else report.added).append(prepared.meta.uri)
        report.chunks += len(prepared.chunks)
