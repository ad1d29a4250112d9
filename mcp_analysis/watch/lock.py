"""One watcher per knowledge base: a second process that would mirror folders into it is refused.

Local knowledge bases: an exclusive, non-blocking `flock` on ``<db>/.watch.lock``, released by
the kernel when the process ends, however it ends. Object-store knowledge bases: a lease in
the shared Redis session store (`sessions.store`), renewed while the watcher runs, lapsing
within `LEASE_SECONDS` of a crash. Without a Redis store, an object-store knowledge base
cannot be guarded: that is logged, and the rule is the operator's (docs/deploying.md).
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

from mcp_analysis.config import Settings, redact_url
from mcp_analysis.errors import AnalysisError
from mcp_analysis.paths import is_local_path

log = logging.getLogger(__name__)

LOCK_FILE = ".watch.lock"
LEASE_SECONDS = 30.0

_RENEW = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0"
_RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"


class WatcherRefused(AnalysisError):
    """Another process already mirrors folders into this knowledge base."""


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

    db.mkdir(parents=True, exist_ok=True)
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


@contextlib.asynccontextmanager
async def _redis_lease(db: str, url: str) -> AsyncIterator[None]:
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(url, socket_timeout=5.0)
    key = f"mcpa:watch:{db}"
    token = f"{secrets.token_hex(8)} {_holder()}"
    try:
        if not await client.set(key, token, nx=True, px=int(LEASE_SECONDS * 1000)):
            holder = await client.get(key)
            raise _refusal(db, (holder or b"").decode(errors="replace").partition(" ")[2])
        renew, release = client.register_script(_RENEW), client.register_script(_RELEASE)
        async with anyio.create_task_group() as tg:

            async def keep() -> None:
                while True:
                    await anyio.sleep(LEASE_SECONDS / 3)
                    if not await renew(keys=[key], args=[token, int(LEASE_SECONDS * 1000)]):
                        log.error("Lost the watch lease of %s in %s: another watcher may start", db, redact_url(url))

            tg.start_soon(keep)
            try:
                yield
            finally:
                tg.cancel_scope.cancel()
                with anyio.CancelScope(shield=True):
                    await release(keys=[key], args=[token])
    finally:
        await client.aclose()


@contextlib.asynccontextmanager
async def watcher_lock(settings: Settings) -> AsyncIterator[None]:
    """Hold the knowledge base's watcher lock for the block; refuse with a clear error if taken."""
    db = str(settings.db)
    if is_local_path(db):
        with _file_lock(Path(db)):
            yield
        return
    if settings.sessions.store:
        async with _redis_lease(db, settings.sessions.store):
            yield
        return
    log.warning(
        "%s is on object storage and no sessions.store (Redis) is set: nothing stops a second watcher. "
        "Run exactly one process with --watch (docs/deploying.md).",
        db,
    )
    yield
