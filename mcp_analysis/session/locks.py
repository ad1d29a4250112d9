"""What one call holds of a session: its in-process lock, its cross-replica lease, its place in memory.

In-process, one lookup of a key runs at a time (`key_lock`). With a shared store, each
request holds the session's lease lock for its whole duration (`lease_for_call`): two
replicas never run one session at once; a second call waits up to `sessions.lock_timeout`,
then gets a clear retryable error. A request also holds the sessions it looked up in memory
until it ends (`hold`): dropped while a call still used one, a parallel call on the same
session would load a second copy, and one of the two would fail as changed by another call.
Everything is released when the request's call scope (session/scope.py) ends.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import anyio

from mcp_analysis.errors import SessionBusyError
from mcp_analysis.session.analysis import AnalysisSession
from mcp_analysis.session.keys import SessionKey
from mcp_analysis.session.scope import current_scope
from mcp_analysis.session.stores.base import LockTimeout, SessionStore, StoreUnavailable
from mcp_analysis.session.upkeep import StoreHealth

log = logging.getLogger(__name__)


class CallLocks:
    """Locks and holds taken on behalf of the current request."""

    def __init__(self, store: SessionStore | None, lock_timeout: float, health: StoreHealth) -> None:
        self.store = store
        self.lock_timeout = lock_timeout
        self.health = health
        #: Calls refused because another call held their session past the lock timeout.
        self.timeouts = 0
        self._key_locks: dict[SessionKey, tuple[anyio.Lock, int]] = {}

    @asynccontextmanager
    async def key_lock(self, key: SessionKey) -> AsyncIterator[None]:
        """One lookup of `key` at a time in this process (the lock goes when nobody waits)."""
        lock, users = self._key_locks.get(key) or (anyio.Lock(fast_acquire=True), 0)
        self._key_locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._key_locks[key]
            if users <= 1:
                del self._key_locks[key]
            else:
                self._key_locks[key] = (lock, users - 1)

    async def lease_for_call(self, key: SessionKey) -> None:
        """Shared store, inside a request: hold the session's lock until the request ends."""
        scope = current_scope()
        store = self.store
        if scope is None or store is None or not store.shared or key.storage in scope.held:
            return
        try:
            token = await store.acquire(key, wait=self.lock_timeout)
        except LockTimeout:
            self.timeouts += 1
            raise SessionBusyError(
                f"Analysis session {key.name!r} is busy: another call on it is still running "
                f"(maybe on another server replica) after {self.lock_timeout:g} s "
                "(sessions.lock_timeout). Retry this call when that one has finished."
            ) from None
        except StoreUnavailable as exc:
            raise self.health.down(exc) from None
        scope.held[key.storage] = token

        async def release() -> None:
            try:
                await store.release(key, token)
            except StoreUnavailable as exc:  # the lease lapses by itself
                log.warning("Could not release the lock of %s: %s", key.storage, exc)

        scope.releases.append(release)

    def hold(self, session: AnalysisSession, when_free: Callable[[], Awaitable[None]]) -> None:
        """Keep `session` in memory until the current request ends; then, if no other request
        holds it, await `when_free` (what the memory budget could not drop meanwhile)."""
        scope = current_scope()
        if scope is None or any(held is session for held in scope.sessions):
            return
        scope.sessions.append(session)
        kept = session.persistence
        kept.hold()

        async def release() -> None:
            if kept.let_go():
                await when_free()

        scope.releases.append(release)
