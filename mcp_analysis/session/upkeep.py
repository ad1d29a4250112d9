"""The session store's health, and the periodic upkeep of one manager.

Health is what /healthz reports (`error`: why the store fails, None while it answers) and
the message every call gets while it is down. Upkeep runs once a second and never raises:
it renews the cross-replica locks this process holds, pings a shared store, counts the
kept sessions, and expires idle ones.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

import anyio

from mcp_analysis.config import Settings
from mcp_analysis.errors import SessionStoreError
from mcp_analysis.session.stores.base import SessionStore, StoreUnavailable

log = logging.getLogger(__name__)

_TICK_SECONDS = 1.0
_LOCK_RENEW_SECONDS = 3.0
_HEALTH_SECONDS = 2.0
_COUNT_SECONDS = 10.0


class StoreHealth:
    """Whether the store answers, and how many sessions it keeps (refreshed by the upkeep)."""

    def __init__(self, store: SessionStore | None) -> None:
        self.store = store
        #: Why the session store is failing (None while it answers); read by /healthz.
        self.error: str | None = None
        self.stored_count = 0

    def down(self, exc: Exception) -> SessionStoreError:
        """The error a call gets when the store cannot be reached (remembered for readiness)."""
        where = self.store.description if self.store is not None else "the session store"
        self.error = str(exc)
        return SessionStoreError(
            f"The session store ({where}) cannot be reached right now ({exc}); analysis sessions are unavailable. "
            "Retry shortly."
        )

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
                if now - last["renew"] >= _LOCK_RENEW_SECONDS:
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
        except StoreUnavailable as exc:
            health.error = str(exc)
        except Exception:  # upkeep must never take the server down
            log.exception("Session maintenance failed")
