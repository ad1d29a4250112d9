"""Follow file events in watched folders and apply them, debounced, once files hold still.

The OS watcher is started just before the first full mirror, so a file saved while the mirror
runs is seen by one or the other; watchfiles sets the watcher up in a thread, though, which may
finish a moment after the mirror began reading: a file saved in that moment into a folder the
mirror already read waits for its next change.
Events are grouped until `watch.debounce_seconds` pass without a new one; each path is then
applied only once its size and mtime (a folder's: those of every file under it) held still
for `watch.settle_seconds`, so a file still being written or copied is never read; a path
still moving waits for the next round. When applying fails as a whole (the store unreachable,
the disk full), the paths are tried again after a backoff (1 s doubling to 60 s) instead of
waiting for another event on them; a file that cannot be read is reported, not retried.
The watched folders themselves are checked every `watch.root_poll_seconds`: one gone (or a mount point
with nothing mounted on it) is logged and keeps its documents; one back, or replaced by another
folder, is logged, watched anew (the OS watcher's watches went with the old folder) and mirrored
whole.
"""

from __future__ import annotations

import logging
import math
import os
import stat
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import anyio
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from mcp_analysis.logging_setup import to_host_without_names
from mcp_analysis.watch.lock import WatchLease, WatchLeaseLost
from mcp_analysis.watch.mirror import FolderMirror, SyncReport
from mcp_analysis.watch.rules import relative_to_any
from mcp_analysis.watch.settings import WatchSettings
from mcp_analysis.watch.undecodable import path_in_error

log = logging.getLogger(__name__)

Signature = tuple[object, ...] | None

RETRY_FIRST_SECONDS = 1.0
RETRY_MAX_SECONDS = 60.0
#: Changes wait at most this many `optimize_idle_seconds` for a quiet moment before compaction runs anyway.
OVERDUE_IDLE_PERIODS = 30
RESTART_SECONDS = 1.0  # before the OS watcher is set up again after it failed; doubles while it keeps failing
RESTART_MAX_SECONDS = 60.0


def signature(path: Path) -> Signature:
    """What changes while a file (or any file under a folder) is written; None when gone. Links are
    never followed (a link's own status is its signature): a link out is refused, never walked."""
    try:
        status = path.lstat()
        if not stat.S_ISDIR(status.st_mode):
            return (status.st_size, status.st_mtime_ns)
        entries = []
        for root, _dirs, names in os.walk(path):  # never enters a linked folder
            for name in names:
                status = (Path(root) / name).lstat()
                entries.append((root, name, status.st_size, status.st_mtime_ns))
        return tuple(sorted(entries))
    except OSError:  # gone (or going) now: a later event or round tells
        return None


def log_report(report: SyncReport, when: str) -> None:
    for path, reason in report.failed:
        log.warning("watch: could not add %s: %s", path, reason)
    if report.changed or report.failed:
        log.info("watch (%s): %s", when, report.summary())
    for what, uris in (("added", report.added), ("changed", report.replaced), ("removed", report.removed)):
        if uris:  # for the person at the MCP host: which files, never what they say
            extra = to_host_without_names(f"Watched folder: {what} {files(len(uris))}")
            log.info("Watched folder: %s %s", what, file_names(uris), extra=extra)
    if report.moved:
        extra = to_host_without_names(f"Watched folder: moved {files(len(report.moved))}")
        log.info("Watched folder: moved %s", file_names([new for _, new in report.moved]), extra=extra)


def files(count: int) -> str:
    return f"{count} file" + ("" if count == 1 else "s")


def file_names(uris: list[str], shown: int = 10) -> str:
    """The file names of `uris` (not their folders), the first `shown` of them and how many more."""
    names = [uri.rstrip("/").rsplit("/", 1)[-1] for uri in uris]
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


class FolderWatcher:
    """Mirrors folders at start, then follows them until cancelled."""

    def __init__(
        self,
        mirror: FolderMirror,
        settings: WatchSettings,
        on_change: Callable[[], None] | None = None,
        lease: WatchLease | None = None,
    ) -> None:
        """`lease`: the watcher lock held; while it is lost, changes wait (the mirror checks it before writing)."""
        self.mirror = mirror
        self.settings = settings
        self._uncompacted_since = 0.0  # monotonic time of the oldest change not compacted yet (0: none)
        self.on_change = on_change
        self.lease = lease
        self._rewatch = anyio.Event()  # set: a watched folder came back, the OS watcher is set up anew
        self._watching = anyio.Event()  # set once the OS watcher (anew) covers every folder present
        self._closing = False  # set when cancelled: the stop event then means "stop", not "watch anew"

    async def run(self, *, task_status: TaskStatus[SyncReport] = anyio.TASK_STATUS_IGNORED) -> None:
        """Start watching, mirror every folder (reported through `task_status`), then follow events."""
        send, receive = anyio.create_memory_object_stream[set[Path]](max_buffer_size=math.inf)
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._stop_watching_when_cancelled)
            await tg.start(self._events, send.clone())
            tg.start_soon(self._roots, send)
            while True:
                await self._hold_lease()
                try:
                    report = await self.mirror.sync()
                    break
                except WatchLeaseLost as exc:
                    log.warning("watch: %s", exc)
            self._applied(report, "start")
            task_status.started(report)
            await self._follow(receive)

    async def _stop_watching_when_cancelled(self) -> None:
        """The OS watcher's thread returns on events, on its stop event or after 5 s, and cancelling
        waits for it: so the stop event is set as soon as this watcher is cancelled (it ends in a step)."""
        try:
            await anyio.sleep_forever()
        finally:
            self._closing = True
            self._rewatch.set()

    def _wanted(self, _change: object, raw: str) -> bool:
        found = relative_to_any(Path(raw), self.mirror.folders)
        if found is None or self.mirror.rules.ignored(found[1]):
            return False
        return self.mirror.excluded.covers(Path(raw)) is None  # e.g. the knowledge base's writes: no events to follow

    async def _events(self, send: MemoryObjectSendStream[set[Path]], *, task_status: TaskStatus[None]) -> None:
        import watchfiles
        from watchfiles._rust_notify import WatchfilesRustInternalError

        logging.getLogger("watchfiles").setLevel(logging.WARNING)  # it logs every batch at INFO; we log what we did
        step = max(1, int(self.settings.debounce_seconds * 1000))
        started = False
        failures = 0
        async with send:
            while True:
                resync = failures > 0  # events since the failure are lost: mirror whole once watched anew
                self._rewatch = anyio.Event()
                present = [f for f in self.mirror.folders if self.mirror.identity(f) is not None]
                if not present:  # every folder gone: nothing to watch until one is back
                    self._watching.set()
                    if not started:
                        task_status.started()
                        started = True
                    await self._rewatch.wait()
                    continue
                changes = watchfiles.awatch(
                    *present,
                    watch_filter=self._wanted,
                    stop_event=self._rewatch,
                    step=step,
                    debounce=max(1600, 4 * step),
                    recursive=True,
                    ignore_permission_denied=True,
                    rust_timeout=1000 if resync else None,
                    yield_on_timeout=resync,  # the first (maybe empty) batch: the OS watcher is set up
                )
                self._watching.set()  # the OS watcher is set up by the first step of the loop below
                if not started:
                    task_status.started()
                    started = True
                lost: list[Exception] = []
                try:
                    async for batch in changes:
                        if resync:
                            await send.send(set(self.mirror.folders))
                            resync, failures = False, 0
                        if batch:
                            await send.send({Path(raw) for _, raw in batch})
                    if self._rewatch.is_set() and not self._closing:
                        continue  # a folder came back: watch it (the roots task mirrors it)
                    return  # cancelled: no stat of the folders, no new OS watcher on the way out
                except* (WatchfilesRustInternalError, OSError) as failed:  # also from watchfiles' task group
                    lost += failed.exceptions
                # The OS watcher gave up: on a batch it cannot report (a file name that is not UTF-8),
                # or on the folders (the system's limit of watches, a folder unmounted). Events are lost
                # meanwhile, so once it is set up again the folders are mirrored whole.
                failures += 1
                delay = min(RESTART_MAX_SECONDS, RESTART_SECONDS * 2 ** (failures - 1))
                log.warning("watch: file events were lost (%s); mirroring the folders again in %.0f s", lost[0], delay)
                named = path_in_error(str(lost[0]))
                if named is not None:
                    self.mirror.undecodable.note(named)
                await anyio.sleep(delay)

    async def _roots(self, send: MemoryObjectSendStream[set[Path]]) -> None:
        """Notice a watched folder gone (deleted, renamed away, unmounted, replaced by a link) and back
        (restored, cloned again, remounted, replaced by rsync): each is logged. A folder gone keeps its
        documents (an unmount or a restore is no deletion: the files deleted one by one were events of
        their own); one back (or replaced) is watched anew, as the OS watcher's watches went with the
        old one, and mirrored whole. So is a share mounted or unmounted under a folder (watch/mounts.py)."""
        folders = self.mirror.folders
        shares = self.mirror.mounts_within
        async with send:
            known = await anyio.to_thread.run_sync(lambda: {f: self.mirror.identity(f) for f in folders})
            mounted = await anyio.to_thread.run_sync(shares.mounted)
            while True:
                await anyio.sleep(self.settings.root_poll_seconds)
                now = await anyio.to_thread.run_sync(lambda: {f: self.mirror.identity(f) for f in folders})
                mounted_now = await anyio.to_thread.run_sync(shares.mounted)
                moved = sorted(mounted ^ mounted_now)  # shares mounted or unmounted under the folders
                for point in moved:
                    how = "mounted on" if point in mounted_now else "unmounted from"
                    log.warning("watch: a file system was %s %s; watching it anew", how, point)
                mounted = mounted_now
                changed = [f for f in folders if now[f] != known[f]]
                for folder in changed:
                    if now[folder] is None:
                        log.warning("watch: watched folder %s is gone; waiting for it (its documents are kept)", folder)
                    else:
                        log.warning(
                            "watch: %s is %s; mirroring it", folder, "back" if known[folder] is None else "a new folder"
                        )
                if moved or any(now[f] is not None for f in changed):
                    self._watching = anyio.Event()
                    self._rewatch.set()
                    await self._watching.wait()
                back = {f for f in changed if now[f] is not None} | set(moved)
                if back:  # mirrored whole: files gone meanwhile go, unchanged ones keep their documents
                    await send.send(back)
                known = now

    async def _follow(self, receive: MemoryObjectReceiveStream[set[Path]]) -> None:
        pending: set[Path] = set()
        failures = 0
        while True:
            if not pending:
                pending |= await self._next_batch(receive)
            while True:
                try:
                    pending |= receive.receive_nowait()
                except anyio.WouldBlock:
                    break
            await self._hold_lease()
            ready = await self._settled(pending)
            pending -= ready
            if not ready:
                continue
            applied = await self._apply(ready)
            if applied is None:  # the lease was lost: held back until it is ours again, read anew then
                pending |= ready
                continue
            if applied:
                failures = 0
                continue
            failures += 1
            pending |= ready
            delay = min(RETRY_MAX_SECONDS, RETRY_FIRST_SECONDS * 2 ** (failures - 1))
            log.warning("watch: trying %d path(s) again in %.0f s", len(ready), delay)
            await anyio.sleep(delay)  # events meanwhile queue up in the stream

    async def _next_batch(self, receive: MemoryObjectReceiveStream[set[Path]]) -> set[Path]:
        """The next paths changed; once none came for `optimize_idle_seconds` the tables are compacted
        (if changes were applied), and the conversion worker is ended after `keep_worker_seconds`."""
        if self.mirror.uncompacted:
            now = time.monotonic()
            self._uncompacted_since = self._uncompacted_since or now
            # a folder that never goes quiet (a log, an autosaving editor) is compacted all the same
            overdue = now - self._uncompacted_since >= OVERDUE_IDLE_PERIODS * self.settings.optimize_idle_seconds
            if not overdue:
                with anyio.move_on_after(self.settings.optimize_idle_seconds):
                    return await receive.receive()
            else:
                waited = now - self._uncompacted_since
                log.info("watch: changes kept coming for %.0f s; compacting without a quiet moment", waited)
            await self._optimize()
            self._uncompacted_since = 0.0
        with anyio.move_on_after(self.settings.keep_worker_seconds):
            return await receive.receive()
        await anyio.to_thread.run_sync(self.mirror.release_workers)
        return await receive.receive()

    async def _settled(self, paths: Iterable[Path]) -> set[Path]:
        """The paths whose signature did not change over `settle_seconds`."""
        paths = list(paths)
        before = await anyio.to_thread.run_sync(lambda: [signature(p) for p in paths])
        await anyio.sleep(self.settings.settle_seconds)
        after = await anyio.to_thread.run_sync(lambda: [signature(p) for p in paths])
        return {p for p, a, b in zip(paths, before, after, strict=True) if a == b}

    async def _optimize(self) -> None:
        """Compact now; a failure is logged and tried again after the next change (the server keeps serving)."""
        await self._hold_lease()
        try:
            await self.mirror.optimize()
        except WatchLeaseLost as exc:
            log.warning("watch: %s", exc)
        except Exception as exc:
            log.error("watch: could not compact the knowledge base: %s", exc, exc_info=True)

    async def _hold_lease(self) -> None:
        if self.lease is not None:
            await self.lease.wait_held()

    async def _apply(self, paths: set[Path]) -> bool | None:
        """Apply the changes; False when that failed as a whole (the caller tries again later), None
        when the watch lease was lost before a write."""
        try:
            report = await self.mirror.apply(sorted(paths))
        except WatchLeaseLost as exc:
            log.warning("watch: %s", exc)
            return None
        except Exception as exc:  # the server keeps serving
            log.error("watch: could not apply changes to %d path(s): %s", len(paths), exc, exc_info=True)
            return False
        self._applied(report, "change")
        return True

    def _applied(self, report: SyncReport, when: str) -> None:
        log_report(report, when)
        if report.changed and self.on_change is not None:
            self.on_change()
