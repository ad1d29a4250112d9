"""Analysis sessions by client key: created on demand, expired when idle, persisted.

Keys name the client (see server/identity.py): ``local`` (stdio / in-memory),
``http:<mcp-session-id>`` (legacy HTTP), ``principal:<name>`` (bearer token) and
``handle:<session id>`` (server-issued handles for sessionless clients). Sessions
keyed by handle or principal are persisted (state + interpreter dump) so they
survive restarts; the others end with their connection anyway.

A session remembers its owner (the authenticated principal, if any) and its
filter; a key presented by another owner, or with another filter, is refused as
unknown, so one client can never reach another's variables or citations.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import anyio

from mcp_analysis.config import Settings, data_home
from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.errors import SessionNotFoundError
from mcp_analysis.sandbox.pool import WorkerPool
from mcp_analysis.session.analysis import AnalysisSession, new_session_id
from mcp_analysis.session.persist import SessionRecord, SessionStore

log = logging.getLogger(__name__)

PERSISTED_PREFIXES = ("handle:", "principal:")
_FLUSH_SECONDS = 1.0


def default_sessions_dir(settings: Settings) -> Path:
    import hashlib

    digest = hashlib.sha256(str(settings.db).encode()).hexdigest()[:16]
    return data_home() / "sessions" / digest


class SessionManager:
    def __init__(self, kb: KnowledgeBase, pool: WorkerPool, settings: Settings) -> None:
        self.kb = kb
        self.pool = pool
        self.settings = settings
        self._sessions: dict[str, AnalysisSession] = {}
        self._by_id: dict[str, str] = {}
        self._lock = anyio.Lock()
        self.store: SessionStore | None = None
        if settings.sessions.persist:
            directory = settings.sessions.dir or default_sessions_dir(settings)
            try:
                self.store = SessionStore(Path(directory))
            except OSError as exc:
                log.warning("Session persistence disabled: cannot use %s (%s)", directory, exc)
        self._task_group: Any = None

    async def __aenter__(self) -> SessionManager:
        self._task_group = anyio.create_task_group()
        await self._task_group.__aenter__()
        self._task_group.start_soon(self._maintenance_loop)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task_group is not None:
            self._task_group.cancel_scope.cancel()
            await self._task_group.__aexit__(None, None, None)
        with anyio.CancelScope(shield=True):
            self.flush()
            for session in list(self._sessions.values()):
                await session.close()
            self._sessions.clear()

    def __len__(self) -> int:
        return len(self._sessions)

    # ------------------------------------------------------------------ lookup

    async def get(
        self, key: str, *, document_filter: str | None, owner: str | None = None, create: bool = True
    ) -> AnalysisSession:
        """The session for `key`, restored from disk or created if allowed."""
        async with self._lock:
            session = self._sessions.get(key)
            if session is not None:
                if session.owner != owner or session.state.document_filter != document_filter:
                    raise SessionNotFoundError(self._unknown(key))
                session.last_used = time.monotonic()
                return session
            session = await self._restore(key, document_filter, owner)
            if session is None:
                if not create:
                    raise SessionNotFoundError(self._unknown(key))
                session_id = key.removeprefix("handle:") if key.startswith("handle:") else new_session_id()
                session = AnalysisSession(
                    self.kb, filter=document_filter, pool=self.pool, session_id=session_id, owner=owner
                )
                await session.start()
            self._sessions[key] = session
            self._by_id[session.id] = key
            await self._enforce_capacity()
            return session

    async def create_handle(self, *, document_filter: str | None, owner: str | None) -> AnalysisSession:
        """A new session addressed by a server-issued handle (sessionless clients)."""
        return await self.get(f"handle:{new_session_id()}", document_filter=document_filter, owner=owner)

    def by_id(self, session_id: str, owner: str | None) -> AnalysisSession | None:
        """A live session by its public id, if `owner` may see it."""
        key = self._by_id.get(session_id)
        session = self._sessions.get(key) if key else None
        if session is None or session.owner != owner:
            return None
        return session

    async def by_id_or_disk(self, session_id: str, owner: str | None, document_filter: str | None) -> AnalysisSession:
        session = self.by_id(session_id, owner)
        if session is not None:
            return session
        return await self.get(f"handle:{session_id}", document_filter=document_filter, owner=owner, create=False)

    @staticmethod
    def _unknown(key: str) -> str:
        shown = key.split(":", 1)[-1]
        return (
            f"Unknown or expired analysis session {shown!r}. Call new_analysis (or omit `session`) to start "
            "a new one; variables of an expired session are gone."
        )

    async def _restore(self, key: str, document_filter: str | None, owner: str | None) -> AnalysisSession | None:
        if self.store is None or not key.startswith(PERSISTED_PREFIXES):
            return None
        loaded = await anyio.to_thread.run_sync(self.store.load, key)
        if loaded is None:
            return None
        record, blob = loaded
        if record.owner != owner or record.document_filter != document_filter:
            return None
        if time.time() - record.last_used > self.settings.sessions.ttl_seconds:
            self.store.delete(key)
            return None
        session = AnalysisSession(
            self.kb,
            filter=document_filter,
            pool=self.pool,
            session_id=record.session_id,
            state=record.state,
            interpreter_state=blob,
            owner=owner,
        )
        await session.start()
        log.info("Restored analysis session %s from disk", record.session_id)
        return session

    # ------------------------------------------------------------- lifecycle

    async def drop(self, key: str) -> None:
        session = self._sessions.pop(key, None)
        if session is not None:
            self._by_id.pop(session.id, None)
            await session.close()
        if self.store is not None:
            self.store.delete(key)

    def flush(self) -> None:
        """Write dirty persisted sessions to disk."""
        if self.store is None:
            return
        for key, session in list(self._sessions.items()):
            if session.dirty and key.startswith(PERSISTED_PREFIXES):
                self._save(key, session)

    def _save(self, key: str, session: AnalysisSession) -> None:
        assert self.store is not None
        session.dirty = False
        idle = time.monotonic() - session.last_used
        record = SessionRecord(
            key=key,
            session_id=session.id,
            owner=session.owner,
            document_filter=session.state.document_filter,
            state=session.state,
            last_used=time.time() - idle,
        )
        try:
            self.store.save(record, session.interpreter_state)
        except OSError as exc:
            log.warning("Could not persist session %s: %s", session.id, exc)

    async def _enforce_capacity(self) -> None:
        limit = self.settings.sessions.max_sessions
        if len(self._sessions) <= limit:
            return
        for key, session in sorted(self._sessions.items(), key=lambda kv: kv[1].last_used):
            if len(self._sessions) <= limit:
                break
            if session.interpreter is not None and not session.interpreter.is_idle:
                continue
            if key.startswith(PERSISTED_PREFIXES) and self.store is not None:
                self._save(key, session)
            self._sessions.pop(key, None)
            self._by_id.pop(session.id, None)
            await session.close()

    async def expire(self) -> int:
        ttl = self.settings.sessions.ttl_seconds
        cutoff = time.monotonic() - ttl
        gone = 0
        for key, session in list(self._sessions.items()):
            busy = session.interpreter is not None and not session.interpreter.is_idle
            if session.last_used < cutoff and not busy:
                await self.drop(key)
                gone += 1
        if self.store is not None:
            gone += await anyio.to_thread.run_sync(self.store.expire, ttl)
        return gone

    async def _maintenance_loop(self) -> None:
        last_expiry = time.monotonic()
        while True:
            await anyio.sleep(_FLUSH_SECONDS)
            try:
                self.flush()
                if time.monotonic() - last_expiry > min(60.0, self.settings.sessions.ttl_seconds / 2):
                    last_expiry = time.monotonic()
                    removed = await self.expire()
                    if removed:
                        log.info("Expired %d idle analysis session(s)", removed)
            except Exception:  # maintenance must never take the server down
                log.exception("Session maintenance failed")
