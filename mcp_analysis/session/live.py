"""The sessions in this process's memory: by key and by public id, at most `sessions.max_sessions`.

Dropping a session from memory loses nothing that was kept in the store (its next call loads
it again); a session that lives only in memory (a legacy HTTP connection's, every session
without a store) would end there, so it is never dropped to make room: a *new* session that
would need it gone is refused instead, with an error naming the limit. Only idle sessions are
dropped (no request holds them, no save of them runs, their interpreter is not running code),
and only those with a stored copy or nothing worth keeping. One client (session/clients.py)
may hold at most `sessions.max_live_per_client` sessions that live only in memory, so it
cannot take every place.
"""

from __future__ import annotations

import time

from mcp_analysis.errors import SessionLimitError
from mcp_analysis.session.analysis import AnalysisSession
from mcp_analysis.session.keys import SessionKey
from mcp_analysis.session.settings import SessionSettings


def busy(session: AnalysisSession) -> bool:
    """A request, a save or running code uses `session`: it must stay in memory."""
    if session.persistence.held:
        return True
    return session.interpreter is not None and not session.interpreter.is_idle


def droppable(session: AnalysisSession) -> bool:
    """Idle, and its next call loses nothing if it leaves memory now (the store has it, or it holds nothing)."""
    return not busy(session) and (session.persistence.stored_copy or not session.worth_keeping)


class LiveSessions:
    """Live sessions by key (and by public id, which resolves handles to keys)."""

    def __init__(self, settings: SessionSettings) -> None:
        self.settings = settings
        self.max_sessions = settings.max_sessions
        self._sessions: dict[SessionKey, AnalysisSession] = {}
        self._by_id: dict[str, SessionKey] = {}
        self._client_of: dict[SessionKey, str] = {}  # sessions that live only in memory: whose
        self._by_client: dict[str, set[SessionKey]] = {}
        #: New sessions refused because memory held too many that cannot leave it.
        self.refused = 0

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

    def register(self, key: SessionKey, session: AnalysisSession, client: str) -> None:
        """`session` is live under `key`; `client` holds it (counted only if it lives only in memory)."""
        self._sessions[key] = session
        self._by_id[session.id] = key
        if not session.persistence.in_store and key not in self._client_of:
            self._client_of[key] = client
            self._by_client.setdefault(client, set()).add(key)

    async def evict(self, key: SessionKey, session: AnalysisSession) -> None:
        """Forget and close the in-memory copy (the store keeps what was kept)."""
        if self._sessions.get(key) is session:
            self._sessions.pop(key, None)
            self._by_id.pop(session.id, None)
            self._forget_client(key)
        await session.close()

    def _forget_client(self, key: SessionKey) -> None:
        client = self._client_of.pop(key, None)
        if client is not None:
            mine = self._by_client[client]
            mine.discard(key)
            if not mine:
                del self._by_client[client]

    # -------------------------------------------------------------- capacity

    async def admit(self, client: str, *, in_store: bool) -> None:
        """Room for one more session of `client`, or SessionLimitError (nothing is dropped that would be lost).

        A session kept in the store is always admitted: it leaves memory again once idle."""
        if in_store:
            return
        limit = self.settings.max_live_per_client
        if len(self._by_client.get(client, ())) >= limit:
            await self._drop([(k, self._sessions[k]) for k in self._by_client[client]], room=limit - 1)
            held = len(self._by_client.get(client, ()))
            if held >= limit:
                self.refused += 1
                raise SessionLimitError(
                    f"This client ({client}) already holds {held} analysis sessions that live only in this "
                    f"server's memory, the most one client may hold (sessions.max_live_per_client = {limit}); "
                    "this call was not run. Continue one of them (reuse your connection, or pass its `session` "
                    f"handle), or retry once idle ones expire (sessions.ttl_seconds = {self.settings.ttl_seconds:g})."
                )
        if len(self._sessions) >= self.max_sessions:
            await self.enforce_count(room=1)
            if len(self._sessions) >= self.max_sessions:
                self.refused += 1
                raise SessionLimitError(
                    f"The server holds {len(self._sessions)} analysis sessions in memory, its limit "
                    f"(sessions.max_sessions = {self.max_sessions}), and none of them can leave memory without "
                    "losing its variables; this call was not run (no other session was touched). Continue an "
                    f"existing session, or retry once idle ones expire (sessions.ttl_seconds = "
                    f"{self.settings.ttl_seconds:g})."
                )

    async def enforce_count(self, room: int = 0) -> None:
        """At most `max_sessions - room` live, as far as dropping loses nothing: least recently used first."""
        if len(self._sessions) > self.max_sessions - room:
            await self._drop(self.least_recent_first(), room=self.max_sessions - room)

    async def _drop(self, candidates: list[tuple[SessionKey, AnalysisSession]], *, room: int) -> None:
        """Drop `droppable` sessions among `candidates` (least recent first) while more than `room` of them live."""
        left = len(candidates)
        for key, session in sorted(candidates, key=lambda kv: kv[1].last_used):
            if left <= room:
                break
            if droppable(session):
                await self.evict(key, session)
                left -= 1

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
        self._client_of.clear()
        self._by_client.clear()
