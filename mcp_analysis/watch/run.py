"""Open a knowledge base for mirroring: the store (created if new) and the mirror; `sync` once."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import anyio

from mcp_analysis.config import Settings
from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.watch.lock import WatchLease
from mcp_analysis.watch.mirror import FolderMirror, SyncReport
from mcp_analysis.watch.rules import FileRules, check_folders


async def open_mirror(settings: Settings, folders: Sequence[Path], lease: WatchLease | None = None) -> FolderMirror:
    """The mirror of `folders` on an opened, initialised store (the caller holds the watcher lock,
    `lease`, checked before every write, and ends it with `close_mirror`). A new knowledge base
    gets its tables first: servers need them."""
    kb = await KnowledgeBase.open(settings, create=True)
    mirror: FolderMirror | None = None
    try:
        rules = FileRules(settings.watch.include, settings.watch.ignore, settings.watch.hidden)
        before_write = lease.check if lease is not None else None
        mirror = await anyio.to_thread.run_sync(FolderMirror, kb, check_folders(folders), rules, before_write)
        if not kb.store.ready:
            await mirror.ingestor.add([])
    except BaseException:
        if mirror is not None:
            mirror.close()
        await kb.close()
        raise
    return mirror


async def close_mirror(mirror: FolderMirror) -> None:
    """End the mirror's conversion workers and close its knowledge base."""
    await anyio.to_thread.run_sync(mirror.close)
    await mirror.kb.close()


async def sync_once(settings: Settings, folders: Sequence[Path], lease: WatchLease | None = None) -> SyncReport:
    """`mcp-analysis sync`: mirror the folders once (the caller holds the watcher lock, `lease`)."""
    mirror = await open_mirror(settings, folders, lease)
    try:
        return await mirror.sync()
    finally:
        with anyio.CancelScope(shield=True):  # the workers and the knowledge base end even when cancelled
            await close_mirror(mirror)
