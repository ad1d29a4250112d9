"""The sessions in this process's memory: by key and by public id, at most `sessions.max_sessions`.

Dropping a session from memory loses nothing that was kept in the store (its next call loads
it again); a session that lives only in memory ends there. Only idle sessions are dropped:
no request holds them, no save of them runs and their interpreter is not running code.
"""

from __future__ import annotations

import time

from mcp_analysis.session.analysis import AnalysisSession
from mcp_analysis.session.keys import SessionKey


def busy(session: AnalysisSession) -> bool:
    """A request, a save or running code uses `session`: it must stay in memory."""
    if session.persistence.held:
        return True
    return session.interpreter is not None and not session.interpreter.is_idle


class LiveSessions:
    """Live sessions by key (and by public id, which resolves handles to keys)."""

    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = max_sessions
        self._sessions: dict[SessionKey, AnalysisSession] = {}
        self._by_id: dict[str, SessionKey] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, key: SessionKey) -> AnalysisSession | None:
        return self._sessions.get(key)

    def key_of(self, session_id: str) -> SessionKey | None:
        """The key of the live session whose public id is `session_id`."""
        return self._by_id.get(session_id)

    def holds(self, key: SessionKey, session: AnalysisSession) -> bool:
        """Whether `session` is the one registered under `key` (not a stale or unregistered copy)."""
        return self._sessions.get(key) is session

    def sessions(self) -> list[AnalysisSession]:
        return list(self._sessions.values())

    def least_recent_first(self) -> list[tuple[SessionKey, AnalysisSession]]:
        return sorted(self._sessions.items(), key=lambda kv: kv[1].last_used)

    @property
    def attached(self) -> int:
        """Live sessions whose interpreter holds a worker now."""
        return sum(1 for s in self._sessions.values() if s.attached)

    def register(self, key: SessionKey, session: AnalysisSession) -> None:
        self._sessions[key] = session
        self._by_id[session.id] = key

    async def evict(self, key: SessionKey, session: AnalysisSession) -> None:
        """Forget and close the in-memory copy (the store keeps what was kept)."""
        if self._sessions.get(key) is session:
            self._sessions.pop(key, None)
            self._by_id.pop(session.id, None)
        await session.close()

    async def enforce_count(self) -> None:
        """At most `max_sessions` live: the least recently used idle ones leave memory."""
        if len(self._sessions) <= self.max_sessions:
            return
        for key, session in self.least_recent_first():
            if len(self._sessions) <= self.max_sessions:
                break
            if not busy(session):
                await self.evict(key, session)

    async def expire_idle(self, ttl_seconds: float) -> int:
        """Drop sessions idle past the TTL; returns how many went."""
        cutoff = time.monotonic() - ttl_seconds
        gone = 0
        for key, session in list(self._sessions.items()):
            if session.last_used < cutoff and not busy(session):
                await self.evict(key, session)
                gone += 1
        return gone

    async def close_all(self) -> None:
        for session in list(self._sessions.values()):
            await session.close()
        self._sessions.clear()
        self._by_id.clear()
