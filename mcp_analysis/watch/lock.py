"""One watcher per knowledge base: a second process that would mirror folders into it is refused.

Local knowledge bases: an exclusive, non-blocking `flock` on ``<db>/.watch.lock``, released by
the kernel when the process ends, however it ends. Object-store knowledge bases: a lease in
the shared Redis session store (`sessions.store`), renewed while the watcher runs, lapsing
within `watch.lease_seconds` of a crash. A holder whose lease is gone (Redis flushed, restarted
without persistence, the key evicted) applies no change until it holds the lease again. Without
a Redis store, an object-store knowledge base cannot be guarded: that is logged, and the rule is
the operator's (docs/deploying.md).
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import socket
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

import anyio

from mcp_analysis.config import Settings
from mcp_analysis.errors import AnalysisError
from mcp_analysis.paths import is_local_path, make_database_directory
from mcp_analysis.redact import redact_url

log = logging.getLogger(__name__)

LOCK_FILE = ".watch.lock"
_RENEW = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0"
_RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"


class WatcherRefused(AnalysisError):
    """Another process already mirrors folders into this knowledge base."""


class WatchLeaseLost(AnalysisError):
    """This watcher's lease is gone: it must not write until it holds the lease again."""


def _holder() -> str:
    return f"pid {os.getpid()} on {socket.gethostname()} since {datetime.now(UTC).isoformat(timespec='seconds')}"


def _refusal(db: str, holder: str) -> WatcherRefused:
    return WatcherRefused(
        f"Another process already watches folders into {db} ({holder or 'holder unknown'}): exactly one "
        "process may write a knowledge base from watched folders. Stop that one, or run this one without "
        "--watch (servers without --watch still see its changes)."
    )


@contextlib.contextmanager
def _file_lock(db: Path) -> Iterator[None]:
    import fcntl

    make_database_directory(db)  # a --db naming a file is said as `add` says it, not as "FileExistsError"
    path = db / LOCK_FILE
    handle: IO[str] = open(path, "a+")  # noqa: SIM115 - held for the watcher's lifetime
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            raise _refusal(str(db), handle.read().strip()) from None
        handle.seek(0)
        handle.truncate()
        handle.write(_holder() + "\n")
        handle.flush()
        try:
            yield
        finally:
            handle.seek(0)
            handle.truncate()
            fcntl.flock(handle, fcntl.LOCK_UN)
    finally:
        handle.close()


class WatchLease:
    """Whether this process may write the knowledge base from its watched folders right now.

    A local file lock is held until the process ends. A Redis lease can be lost while held (Redis
    flushed, restarted without persistence, the key evicted): its holder then stops applying
    changes (`wait_held`) and takes the lease again only once nobody else holds it.
    """

    def __init__(self, db: str) -> None:
        self.db = db
        self.held = True
        self._regained = anyio.Event()

    async def confirm(self) -> bool:
        """Whether the lease is still ours, asked of its keeper just before a write."""
        return self.held

    async def check(self) -> None:
        """Raise `WatchLeaseLost` unless the lease is ours: awaited before every write of a batch."""
        if not await self.confirm():
            raise WatchLeaseLost(
                f"This process no longer holds the watch lease of {self.db} (another process may be writing "
                "it): nothing more was written. Its changes are applied once it holds the lease again."
            )

    async def wait_held(self) -> None:
        """Return once the lease is held (at once, normally); log while it is not."""
        if await self.confirm():
            return
        log.warning("watch: changes to %s are held back until this process holds the watch lease again", self.db)
        while not self.held:
            await self._regained.wait()
        log.info("watch: holding the watch lease of %s again; applying the changes held back", self.db)

    def _set(self, held: bool) -> None:
        if held and not self.held:
            self._regained.set()
            self._regained = anyio.Event()
        self.held = held


class _RedisLease(WatchLease):
    """The lease `mcpa:watch:<db>` in Redis, renewed every third of its time by `keep`."""

    def __init__(self, db: str, url: str, seconds: float) -> None:
        import redis.asyncio as aioredis

        super().__init__(db)
        self.url = url
        self.seconds = seconds
        self.client = aioredis.Redis.from_url(url, socket_timeout=5.0)
        self.key = f"mcpa:watch:{db}"
        self.token = f"{secrets.token_hex(8)} {_holder()}"
        self._renew = self.client.register_script(_RENEW)
        self._release = self.client.register_script(_RELEASE)

    async def take(self) -> bool:
        return bool(await self.client.set(self.key, self.token, nx=True, px=int(self.seconds * 1000)))

    async def holder(self) -> str:
        held_by = await self.client.get(self.key)
        return (held_by or b"").decode(errors="replace").partition(" ")[2]

    async def confirm(self) -> bool:
        if self.held:
            try:
                mine = await self.client.get(self.key) == self.token.encode()
            except Exception as exc:  # unreachable: it may lapse meanwhile and be taken by another
                log.warning("watch: cannot check the watch lease of %s: %s", self.db, exc)
                mine = False
            if not mine:
                self._lost()
        return self.held

    async def keep(self) -> None:
        """Renew while held; once lost, take it again as soon as nobody holds it."""
        while True:
            await anyio.sleep(self.seconds / 3)
            try:
                if self.held:
                    if not await self._renew(keys=[self.key], args=[self.token, int(self.seconds * 1000)]):
                        self._lost()
                elif await self.take():
                    self._set(True)
            except Exception as exc:  # Redis unreachable: the lease may lapse and be taken meanwhile
                if self.held:
                    log.warning("watch: cannot renew the watch lease of %s: %s", self.db, exc)
                    self._lost()

    def _lost(self) -> None:
        if self.held:
            log.error(
                "Lost the watch lease of %s in %s: no change is applied until this process holds it again",
                self.db,
                redact_url(self.url),
            )
        self._set(False)

    async def release(self) -> None:
        await self._release(keys=[self.key], args=[self.token])


@contextlib.asynccontextmanager
async def _redis_lease(db: str, url: str, seconds: float) -> AsyncIterator[WatchLease]:
    lease = _RedisLease(db, url, seconds)
    try:
        if not await lease.take():
            raise _refusal(db, await lease.holder())
        async with anyio.create_task_group() as tg:
            tg.start_soon(lease.keep)
            try:
                yield lease
            finally:
                tg.cancel_scope.cancel()
                with anyio.CancelScope(shield=True):
                    with contextlib.suppress(Exception):  # unreachable: the lease lapses on its own
                        await lease.release()
    finally:
        await lease.client.aclose()


@contextlib.asynccontextmanager
async def watcher_lock(settings: Settings) -> AsyncIterator[WatchLease]:
    """Hold the knowledge base's watcher lock for the block; refuse with a clear error if taken.

    Writers check the lease it yields (`WatchLease.wait_held`) before each batch of changes."""
    db = str(settings.db)
    if is_local_path(db):
        with _file_lock(Path(db)):
            yield WatchLease(db)
        return
    if settings.sessions.store:
        async with _redis_lease(db, settings.sessions.store, settings.watch.lease_seconds) as lease:
            yield lease
        return
    log.warning(
        "%s is on object storage and no sessions.store (Redis) is set: nothing stops a second watcher. "
        "Run exactly one process with --watch (docs/deploying.md).",
        db,
    )
    yield WatchLease(db)
