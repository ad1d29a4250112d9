"""The session store's health, and the periodic upkeep of one manager.

Health is what /healthz reports (`error`: why the store fails, None while it answers) and
the message every call gets while it is down. A store that answers but is full (Redis at
its maxmemory) is not down: calls get "the session store is full" and readiness holds, so a
balancer never pulls replicas that are as healthy as their store lets them be. Upkeep runs
once a second and never raises: it renews the cross-replica locks this process holds, pings
a shared store, counts the kept sessions, and expires idle ones.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

import anyio

from mcp_analysis.config import Settings
from mcp_analysis.errors import AnalysisError, SessionLimitError, SessionStoreError
from mcp_analysis.session.stores.base import SessionStore, StoreOutOfMemory, StoreUnavailable

log = logging.getLogger(__name__)

_TICK_SECONDS = 1.0
_LOCK_RENEW_SECONDS = 3.0
_HEALTH_SECONDS = 2.0
_COUNT_SECONDS = 10.0
_FULL_LOG_SECONDS = 60.0


def store_full_message(where: str, *, call_discarded: bool = False) -> str:
    """What a call is told when the store refuses to keep more for lack of memory."""
    discarded = "; this call's effects were not kept" if call_discarded else ""
    return (
        f"The session store is full: {where} refused to keep more (it reached its maxmemory){discarded}. Calls "
        "that keep or continue analysis sessions are refused until idle sessions expire; nothing kept before "
        "was lost. Retry later. (For the operator: raise Redis's maxmemory, or lower sessions.max_stored_mb "
        "below it as docs/deploying.md sizes it.)"
    )


class StoreHealth:
    """Whether the store answers, and how many sessions it keeps (refreshed by the upkeep)."""

    def __init__(self, store: SessionStore | None) -> None:
        self.store = store
        #: Why the session store is failing (None while it answers); read by /healthz.
        self.error: str | None = None
        self.stored_count = 0
        self._full_logged = -_FULL_LOG_SECONDS

    def down(self, exc: StoreUnavailable) -> AnalysisError:
        """The error a call gets when the store fails: full (readiness holds), or unreachable (remembered)."""
        where = self.store.description if self.store is not None else "the session store"
        if isinstance(exc, StoreOutOfMemory):
            self.full(exc)
            return SessionLimitError(store_full_message(where))
        self.error = str(exc)
        return SessionStoreError(
            f"The session store ({where}) cannot be reached right now ({exc}); analysis sessions are unavailable. "
            "Retry shortly."
        )

    def full(self, exc: StoreOutOfMemory) -> None:
        """Tell the operator (at most once a minute) that the store refuses writes for lack of memory."""
        now = time.monotonic()
        if now - self._full_logged >= _FULL_LOG_SECONDS:
            self._full_logged = now
            log.warning("Session store full: %s; calls that keep sessions are refused until room comes back", exc)

    async def check(self) -> bool:
        """Ping the store; remember the failure for readiness. True when it answers."""
        if self.store is None:
            return True
        try:
            await self.store.ping()
        except StoreUnavailable as exc:
            if self.error is None:
                log.warning("Session store unavailable: %s", exc)
            self.error = str(exc)
            return False
        if self.error is not None:
            log.info("Session store %s is reachable again", self.store.description)
        self.error = None
        return True


async def maintain(health: StoreHealth, settings: Settings, expire: Callable[[], Awaitable[int]]) -> None:
    """Forever, once a second: renew locks, ping, count and expire when each is due."""
    last = {"expiry": time.monotonic(), "renew": 0.0, "health": 0.0, "count": 0.0}
    while True:
        await anyio.sleep(_TICK_SECONDS)
        now = time.monotonic()
        try:
            store = health.store
            if store is not None and store.shared:
                if now - last["renew"] >= min(_LOCK_RENEW_SECONDS, settings.sessions.lock_lease_seconds / 3):
                    last["renew"] = now
                    await store.renew_locks()
                if now - last["health"] >= _HEALTH_SECONDS:
                    last["health"] = now
                    await health.check()
            if store is not None and now - last["count"] >= _COUNT_SECONDS:
                last["count"] = now
                health.stored_count = await store.count()
            if now - last["expiry"] > min(60.0, settings.sessions.ttl_seconds / 2):
                last["expiry"] = now
                removed = await expire()
                if removed:
                    log.info("Expired %d idle analysis session(s)", removed)
        except StoreOutOfMemory as exc:  # full, not down: readiness holds
            health.full(exc)
        except StoreUnavailable as exc:
            health.error = str(exc)
        except Exception:  # upkeep must never take the server down
            log.exception("Session maintenance failed")
