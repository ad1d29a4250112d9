"""Mirror watched folders into the knowledge base: the whole folder at start, or one changed path.

Every change goes through `Ingestor.add`, the path `mcp-analysis add` takes (same readers,
bounds, ingest lock, atomic batches, unchanged bytes skipped by hash). Only documents whose
uri lies inside a watched folder are ever removed. A path is read only when it is its own real
path: a link, or a path under one, never is (a link out of the folders is refused, naming it), so
no document's uri lies outside the folders.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.ingest import formats
from mcp_analysis.ingest.files import display_name, file_uri, link_out
from mcp_analysis.ingest.lock import ingest_lock
from mcp_analysis.ingest.moves import local_path
from mcp_analysis.ingest.own_files import excluded_paths
from mcp_analysis.ingest.pipeline import Ingestor, IngestReport
from mcp_analysis.ingest.pool import ConversionPool
from mcp_analysis.ingest.secrets import named_secret
from mcp_analysis.paths import resolve_links
from mcp_analysis.store.models import DocumentMeta
from mcp_analysis.watch.mounts import MountPoints
from mcp_analysis.watch.rules import FileRules, relative_to_any
from mcp_analysis.watch.undecodable import UndecodableNames

if TYPE_CHECKING:
    from mcp_analysis.store.database import Store

log = logging.getLogger(__name__)


@dataclass
class SyncReport:
    """What one mirroring pass did; `failed` holds (path, reason) of files that could not be read."""

    added: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    moved: list[tuple[str, str]] = field(default_factory=list)  # (old uri, new uri), the same document
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    unsupported: list[str] = field(default_factory=list)
    chunks: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.added or self.replaced or self.moved or self.removed)

    def take(self, ingest: IngestReport) -> None:
        self.added += ingest.added
        self.replaced += ingest.replaced
        self.moved += ingest.moved
        self.unchanged += ingest.unchanged + ingest.metadata_updated
        self.failed += ingest.skipped
        self.chunks += ingest.chunks

    def summary(self) -> str:
        parts = [
            f"{len(self.added)} added",
            f"{len(self.replaced)} replaced",
            f"{len(self.unchanged)} unchanged",
            f"{len(self.removed)} removed",
            f"{len(self.failed)} failed",
        ]
        if self.moved:
            parts.append(f"{len(self.moved)} moved")
        if self.unsupported:
            parts.append(f"{len(self.unsupported)} of an unsupported type")
        return ", ".join(parts) + f" ({self.chunks} chunks written)"


def _utf8(path: Path) -> bool:
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:  # undecodable bytes of the name, kept as surrogates
        return False
    return True


def _inside(uri: str, scope_uri: str) -> bool:
    return uri == scope_uri or uri.startswith(scope_uri.rstrip("/") + "/")


def folder_identity(folder: Path) -> tuple[int, int] | None:
    """A watched folder's device and inode; None when it is gone or no longer a folder of its own
    (a link in its place, or in its path: never followed)."""
    try:
        status = folder.lstat()
    except OSError:
        return None
    if not stat.S_ISDIR(status.st_mode) or resolve_links(folder) != os.fspath(folder):
        return None
    return (status.st_dev, status.st_ino)


class FolderMirror:
    """Keeps the documents of some folders equal to their followed files."""

    def __init__(
        self,
        kb: KnowledgeBase,
        folders: Sequence[Path],
        rules: FileRules,
        before_write: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """`before_write`: awaited before every write (the watch lease's check, which raises once lost)."""
        self.kb = kb
        self.folders = list(folders)
        self.rules = rules
        # One conversion pool for the mirror's life: a change does not wait for a worker's start
        # (its parsers' imports, seconds) when one is still up; `release_workers` ends it when idle.
        self.pool = ConversionPool(kb.settings.ingest.limits(), kb.settings.ingest.chunk_tokens)
        # A document added from outside the watched folders is never taken over by a file inside them.
        self.ingestor = Ingestor(
            kb, pool=self.pool, moves_within=self.folders, before_write=before_write, defer_optimize=True
        )
        #: Changes applied since the tables were last compacted (`optimize`, when idle or at the end of a sync).
        self.uncompacted = 0
        self.before_write = before_write
        self.excluded = excluded_paths(kb.settings, kb.store.path)  # the server's own files: never followed
        self.excluded.warn_inside(self.folders, "watched")
        self.undecodable = UndecodableNames()
        # A folder that is a mount point when the mirror starts and later is not was unmounted: the
        # empty folder beneath is no emptied share (its documents stay until it is mounted again).
        self.mount_points = {f for f in self.folders if os.path.ismount(f)}
        self.mounts_within = MountPoints(self.folders)  # and a share mounted below one, likewise

    def identity(self, folder: Path) -> tuple[int, int] | None:
        """`folder_identity`, None also for a mount point of ours with nothing mounted on it now."""
        if folder in self.mount_points and not os.path.ismount(folder):
            return None
        return folder_identity(folder)

    def release_workers(self) -> None:
        """End the idle conversion worker (it blocks up to ~2 s: call from a thread); a later change starts one."""
        if self.pool.release_idle():
            log.debug("watch: the idle conversion worker was ended")

    def close(self) -> None:
        """End the conversion workers for good (the caller closes `kb`)."""
        self.pool.close()

    async def sync(self) -> SyncReport:
        """Mirror every folder whole (at start, and for `mcp-analysis sync`), then compact."""
        report = await self.apply(self.folders)
        await self.optimize()
        return report

    async def optimize(self) -> None:
        """Compact the tables and fold new rows into the indexes, if changes were applied since the
        last time. Deferred to here (idle time) because it rewrites all five tables: ~140 ms of each
        applied change when it ran every time; rows written meanwhile are searched unindexed."""
        if not self.uncompacted:
            return
        async with self._writing() as store:
            await store.ensure_indexes(self.kb.settings.search.vector_index_min_rows)
            await store.optimize(self.kb.settings.search.vector_index_max_segments)
        self.uncompacted = 0

    @asynccontextmanager
    async def _writing(self) -> AsyncIterator[Store]:
        """The store, writable, the lease checked (`before_write`) and the ingest lock held."""
        store = self.kb.store
        store.check_writable()
        if self.before_write is not None:
            await self.before_write()
        async with ingest_lock(store.path):
            yield store

    async def apply(self, paths: Iterable[Path]) -> SyncReport:
        """Bring the documents under each path (file or folder, present or gone) in line with the disk."""
        report = SyncReport()
        # A folder gone whole (unmounted, renamed away) keeps its documents until it is back.
        alive = await anyio.to_thread.run_sync(lambda: [f for f in self.folders if self.identity(f) is not None])
        scopes = [p for p in dict.fromkeys(paths) if relative_to_any(p, alive) is not None]
        if not scopes:
            return report
        unreadable: list[tuple[Path, str]] = []
        files, unread, refused = await anyio.to_thread.run_sync(self._followed, scopes, unreadable)
        unmounted = await anyio.to_thread.run_sync(self.mounts_within.unmounted, scopes)
        unreadable += [(point, "nothing is mounted on it") for point in unmounted]
        report.unsupported += [str(p) for p in unread if formats.find(p.name) is None and p.suffix]
        report.failed += [(display_name(link), reason) for link, reason in refused]
        report.failed += [
            (display_name(f), f"could not be read ({why}): its documents are kept") for f, why in unreadable
        ]
        secrets: list[str] = []
        if files:
            ingest = await self.ingestor.add(files)
            report.take(ingest)
            secrets = ingest.secrets
            self.uncompacted += len(report.added) + len(report.replaced)
            metas = ingest.documents  # read once per batch: the add read them, and applied its writes
        else:
            metas = await self.kb.store.all_meta() if self.kb.store.ready else []
        # A file that turned out to be a secret is no document: one an earlier version added goes.
        present = {Path(resolve_links(p)).as_uri() for p in files + unread} - set(secrets)
        scope_uris = [p.as_uri() for p in scopes]
        kept = [f.as_uri() for f, _ in unreadable]  # a folder not listed is no folder emptied
        stale = [
            m
            for m in metas
            if m.uri not in present
            and any(_inside(m.uri, s) for s in scope_uris)
            and not any(_inside(m.uri, k) for k in kept)
        ]
        stale = await anyio.to_thread.run_sync(lambda: [m for m in stale if not self._left_be(m.uri)])
        await self._remove(stale, report)
        _name_earlier_documents([link for link, _ in refused], metas)
        return report

    def _followed(
        self, scopes: Sequence[Path], unreadable: list[tuple[Path, str]]
    ) -> tuple[list[Path], list[Path], list[tuple[Path, str]]]:
        """(followed files to read, followed files to leave unread: of an unsupported type, or named
        so that the watcher cannot report them and unchanged, links refused: their target lies
        outside the watched folders) under the scopes. A link is never followed, nor a path
        under one (the OS watcher may report those): a path is read only when it is its own real path.
        Folders that could not be listed are added to `unreadable` with why."""
        files: list[Path] = []
        refused: list[tuple[Path, str]] = []
        for scope in scopes:
            try:
                files += self._scope(scope, refused, unreadable)
            except OSError as error:  # too long a path, a folder above it not searchable: this path alone
                unreadable.append((scope, error.strerror or str(error)))
        supported, unsupported, left_be = [], [], []
        for path in dict.fromkeys(files):
            if not _utf8(path):  # noted now, not only once the OS watcher failed a batch on it
                self.undecodable.note(path)
            if self.undecodable.unchanged(path):  # reading it again would only fail the watcher again
                left_be.append(path)
                continue
            # A known suffix or name, or none (the ingest sniffs those for text); an unknown suffix
            # is counted, not failed. Never opened here: a FIFO would block the watcher.
            if formats.find(path.name) is None and path.suffix:
                unsupported.append(path)
                continue
            supported.append(path)
        return supported, unsupported + left_be, refused  # the first two kept in the knowledge base, neither read

    def _scope(self, scope: Path, refused: list[tuple[Path, str]], unreadable: list[tuple[Path, str]]) -> list[Path]:
        """The followed files at or under one changed path (see `_followed`)."""
        folder, relative = relative_to_any(scope, self.folders) or (scope, Path())
        if resolve_links(scope) != os.fspath(scope):  # a link, or a path under one
            if scope.is_symlink() and not self.rules.ignored(relative):
                self._link(scope, refused)
            return []
        if self.excluded.covers(scope) is not None:
            return []
        if scope.is_file():
            return [scope] if self.rules.follows(relative) else []
        if scope.is_dir() and not self.rules.ignored(relative):
            return self._walk(folder, scope, refused, unreadable)
        return []

    def _left_be(self, uri: str) -> bool:
        """A document whose file is still there, only not followed (hidden, ignored, outside
        watch.include) is not one of a file gone: added by hand (`add W/.private/plan.md`), it stays.
        A secret's name or the server's own file never stays."""
        named = local_path(uri)
        if named is None:
            return False
        path = Path(named)
        where = relative_to_any(path, self.folders)
        if where is None or self.rules.follows(where[1]) or named_secret(path) is not None:
            return False  # a followed file not read as a document (a key now) is no longer one
        if self.excluded.covers(path) is not None:
            return False
        try:
            return stat.S_ISREG(path.lstat().st_mode)
        except OSError:
            return False

    def _walk(
        self, folder: Path, top: Path, refused: list[tuple[Path, str]], unreadable: list[tuple[Path, str]]
    ) -> list[Path]:
        """The followed files under `top` (a real path, so is every path below it: no link is entered);
        a folder that cannot be listed goes to `unreadable` (it is not empty: its documents stay)."""
        found: list[Path] = []

        def failed(error: OSError) -> None:
            unreadable.append((Path(error.filename or top), error.strerror or str(error)))

        for root, dirs, names in os.walk(top, onerror=failed):
            base = Path(root)
            entered = []
            for name in sorted(dirs):
                path = base / name
                if self.rules.ignored(path.relative_to(folder)):
                    continue
                if (kind := _kind(path, failed)) == "link":  # os.walk lists it, never enters it
                    self._link(path, refused, failed)
                elif kind is not None and self.excluded.covers(path) is None:
                    entered.append(name)
            dirs[:] = entered
            for name in sorted(names):
                path = base / name
                if not self.rules.follows(path.relative_to(folder)):
                    continue
                if (kind := _kind(path, failed)) == "link":
                    self._link(path, refused, failed)
                elif kind == "file" and self.excluded.covers(path) is None:
                    found.append(path)
        return found

    def _link(
        self, link: Path, refused: list[tuple[Path, str]], failed: Callable[[OSError], None] | None = None
    ) -> None:
        """A link to outside the watched folders is refused, naming it; one inside is left to its
        target (followed where it lies, if followed): never a uri outside the folders, never twice.
        A link whose target cannot be looked at (a name too long, a folder not searchable) goes to
        `failed` when given: that link alone, not the folder it lies in."""
        try:
            if self.excluded.why(link) is not None:
                return  # a link to the server's own files (`--db W/kblink`): never read, no failure either
            reason = link_out(link, self.folders)
        except OSError as error:
            if failed is None:
                raise
            failed(error)
            return
        if reason is not None:
            refused.append((link, reason))

    async def _remove(self, stale: list[DocumentMeta], report: SyncReport) -> None:
        if not stale:
            return
        async with self._writing() as store:
            await store.delete_documents([meta.id for meta in stale])  # one commit per table for the batch
            report.removed.extend(meta.uri for meta in stale)
        self.uncompacted += len(stale)
        await self.kb.refresh()


def _kind(path: Path, failed: Callable[[OSError], None]) -> str | None:
    """The entry's kind by its own status (link, file, folder or other); None when it is gone, or could
    not be read (`failed` is told: a path longer than the system takes, ENAMETOOLONG, is one)."""
    try:
        mode = path.lstat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as error:
        failed(error)
        return None
    if stat.S_ISLNK(mode):
        return "link"
    return "file" if stat.S_ISREG(mode) else "folder" if stat.S_ISDIR(mode) else "other"


def _name_earlier_documents(links: list[Path], metas: list[DocumentMeta]) -> None:
    """A refused link whose target is a document: made by an earlier version through the link, or
    added by hand from where it lies; which one is not recorded, so it is named, not removed."""
    by_uri = {m.uri: m for m in metas}
    for link in links:
        meta = by_uri.get(file_uri(link))
        if meta is not None:
            log.warning(
                "watch: %s links to %s, a document of this knowledge base (id %s), kept: added by hand, or through "
                "this link by an earlier version. `mcp-analysis rm %s` removes it.",
                display_name(link),
                meta.uri,
                meta.id,
                meta.id,
            )
