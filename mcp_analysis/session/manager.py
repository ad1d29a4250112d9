"""Analysis sessions by client key: found or created on demand, kept in a store, expired when idle.

Keys name the client (`SessionKey`, decided by server/identity.py). Sessions whose key
outlives the connection (a principal, a server-issued handle) are *kept* in the session
store (state + interpreter dump) — a local directory, or Redis shared by replicas — so
they survive restarts and continue on any replica; the others end with their connection.

Only sessions worth keeping are kept (`AnalysisSession.worth_keeping`: variables,
executions or citations); an anonymous sessionless call that only searched or listed
leaves nothing behind. Its handle is signed, so when a client passes it back the server
starts afresh under it (nothing was lost) instead of reporting it expired.

A session remembers its owner (the authenticated principal, if any) and its filter; a key
presented by another owner, or with another filter, is refused as unknown, so one client
can never reach another's variables or citations.

This module finds sessions; the rest lives beside it: what a call holds (locks.py), saving
after each change (commit.py), the sessions in memory and their count (live.py), the
memory budget (memory.py), store health and upkeep (upkeep.py), the stores (stores/).
"""

from __future__ import annotations

import logging
import re
import secrets
import time
from typing import Any

import anyio

from mcp_analysis.config import Settings
from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.errors import SessionNotFoundError
from mcp_analysis.sandbox.pool import WorkerPool
from mcp_analysis.session.analysis import AnalysisSession, new_session_id
from mcp_analysis.session.clients import current_client
from mcp_analysis.session.commit import SaveRefused, WriteThrough
from mcp_analysis.session.keys import KeyKind, SessionKey
from mcp_analysis.session.live import LiveSessions
from mcp_analysis.session.locks import CallLocks
from mcp_analysis.session.memory import MemoryBudget
from mcp_analysis.session.persistence import Persistence
from mcp_analysis.session.stores.base import RecordRefused, SessionStore, Signer, StoreUnavailable
from mcp_analysis.session.stores.factory import open_session_store
from mcp_analysis.session.upkeep import StoreHealth, maintain
from mcp_analysis.text import label

log = logging.getLogger(__name__)

_HANDLE = re.compile(r"s_[A-Za-z0-9_-]{16,40}")  # what Signer.new_handle() and new_session_id() make
REPLACED_NOTICE = (
    "Note: your earlier analysis session was kept under another document filter (or could not be "
    "verified) and was not restored; this is a new session.\n"
)


class SessionManager:
    """Finds, creates and keeps the analysis sessions of one server (see module docs)."""

    def __init__(
        self, kb: KnowledgeBase, pool: WorkerPool, settings: Settings, store: SessionStore | str | None = "default"
    ) -> None:
        self.kb = kb
        self.pool = pool
        self.settings = settings
        if store == "default":
            try:
                store = open_session_store(settings)
            except OSError as exc:
                log.warning("Session persistence disabled: cannot use the session directory (%s)", exc)
                store = None
        assert not isinstance(store, str)
        self.store: SessionStore | None = store
        self.signer = store.signer if store is not None else Signer(secrets.token_bytes(32))
        self.health = StoreHealth(store)
        self.live = LiveSessions(settings.sessions)
        self.memory = MemoryBudget(settings, self.live)
        self.locks = CallLocks(store, settings.sessions.lock_timeout, self.health)
        self.writer = WriteThrough(store, settings) if store is not None else None
        self._task_group: Any = None

    async def __aenter__(self) -> SessionManager:
        self._task_group = anyio.create_task_group()
        await self._task_group.__aenter__()
        self._task_group.start_soon(maintain, self.health, self.settings, self.expire)
        if self.store is not None and self.store.shared:
            await self.health.check()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task_group is not None:
            self._task_group.cancel_scope.cancel()
            await self._task_group.__aexit__(None, None, None)
        with anyio.CancelScope(shield=True):
            await self.live.close_all()
            if self.store is not None:
                await self.store.close()

    def __len__(self) -> int:
        return len(self.live)

    def _kept_in_store(self, key: SessionKey) -> bool:
        return self.store is not None and key.outlives_connection

    # ------------------------------------------------------------------ lookup

    async def get(
        self, key: SessionKey, *, document_filter: str | None, owner: str | None = None, create: bool = True
    ) -> AnalysisSession:
        """The session for `key`: the latest kept version, or a new one if allowed."""
        live = self.live.get(key)
        if not key.belongs_to(owner) or (live is not None and live.owner != owner):
            # Refused before taking the session's lock: another client's calls must not hold it.
            raise SessionNotFoundError(_unknown(key.name))
        if self._kept_in_store(key):
            await self.locks.lease_for_call(key)
        async with self.locks.key_lock(key):
            session = self.live.get(key)
            if session is not None and (session.owner != owner or session.state.document_filter != document_filter):
                raise SessionNotFoundError(_unknown(key.name))
            replaced: int | None = None
            if self._kept_in_store(key):
                session, replaced = await self._latest(key, session, document_filter, owner)
            if session is None:
                if not create:
                    raise SessionNotFoundError(_unknown(key.name))
                in_store = self._kept_in_store(key)
                if key.kind is not KeyKind.HANDLE:
                    await self.live.admit(current_client(owner), in_store=in_store)
                session = await self._new(key, self._new_id(key, owner), document_filter, owner)
                if replaced is not None:  # the first save overwrites the unusable kept version
                    session.persistence.replaces(replaced)
                    session.notify(REPLACED_NOTICE)
                if key.kind is not KeyKind.HANDLE:
                    self.live.register(key, session, current_client(owner))
                    await self._enforce_capacity()
            session.last_used = time.monotonic()
            self.locks.hold(session, self._after_call)
            return session

    async def create_handle(self, *, document_filter: str | None, owner: str | None) -> AnalysisSession:
        """A new session addressed by a server-issued handle (sessionless clients).

        It is only registered and kept once it holds something worth keeping; without a store it
        would live only in memory, so it must fit the bounds first (`LiveSessions.admit`)."""
        handle = self.signer.new_handle(owner)
        key = SessionKey.handle(handle)
        await self.live.admit(current_client(owner), in_store=self._kept_in_store(key))
        return await self._new(key, handle, document_filter, owner)

    def _new_id(self, key: SessionKey, owner: str | None) -> str:
        """The public id of a new session. Only ids of sessions that can outlive their client's
        connection are signed: a signed id that was never kept starts afresh when passed back,
        while the id of an ended legacy HTTP session must stay unknown, not come back empty."""
        if key.kind is KeyKind.HANDLE:
            return key.value
        if key.kind is KeyKind.HTTP:
            return new_session_id()
        return self.signer.new_handle(owner)

    async def resolve(
        self, handle: str, *, owner: str | None, document_filter: str | None, fresh: bool = True
    ) -> AnalysisSession:
        """The session a client names by its public id (the `session` argument).

        An id this deployment issued for a session that was never kept (nothing worth keeping
        happened in it) starts a fresh session under that id, when `fresh`."""
        if not _HANDLE.fullmatch(handle):  # never a store key: a client may send megabytes
            raise SessionNotFoundError(_unknown(handle))
        key = self.live.key_of(handle)
        if key is not None and key.kind is not KeyKind.HANDLE:
            try:
                session = await self.get(key, document_filter=document_filter, owner=owner, create=False)
            except SessionNotFoundError:  # named by the handle given, not by whose key it is
                raise SessionNotFoundError(_unknown(handle)) from None
            if session.id == handle:
                return session
            raise SessionNotFoundError(_unknown(handle))
        if owner is not None and key is None:
            # A principal's own session, perhaps last used on another replica.
            try:
                mine = await self.get(
                    SessionKey.principal(owner), document_filter=document_filter, owner=owner, create=False
                )
            except SessionNotFoundError:
                mine = None
            if mine is not None and mine.id == handle:
                return mine
        key = SessionKey.handle(handle)
        try:
            return await self.get(key, document_filter=document_filter, owner=owner, create=False)
        except SessionNotFoundError:
            if not fresh or not self.signer.issued(handle, owner) or await self._was_kept(key):
                raise
        await self.live.admit(current_client(owner), in_store=self._kept_in_store(key))
        return await self._new(key, handle, document_filter, owner)

    def by_id(self, session_id: str, owner: str | None) -> AnalysisSession | None:
        """A live session in this process by its public id, if `owner` may see it."""
        key = self.live.key_of(session_id)
        session = self.live.get(key) if key is not None else None
        if session is None or session.owner != owner:
            return None
        return session

    async def _was_kept(self, key: SessionKey) -> bool:
        if self.store is None:
            return False
        try:
            return await self.store.was_kept(key)
        except StoreUnavailable as exc:
            raise self.health.down(exc) from None

    async def _new(
        self, key: SessionKey, session_id: str, document_filter: str | None, owner: str | None
    ) -> AnalysisSession:
        session = AnalysisSession(
            self.kb,
            filter=document_filter,
            pool=self.pool,
            session_id=session_id,
            owner=owner,
            persistence=self._persistence(key),
        )
        return await session.start()

    def _persistence(self, key: SessionKey) -> Persistence[AnalysisSession]:
        return Persistence(key, self, in_store=self._kept_in_store(key))

    async def _latest(
        self, key: SessionKey, session: AnalysisSession | None, document_filter: str | None, owner: str | None
    ) -> tuple[AnalysisSession | None, int | None]:
        """The latest kept version of `key`: the live copy if current, else loaded from the store.

        Also the version of a kept record that a new session may overwrite: a principal's own key
        whose record is unusable for this call (kept under another document filter after the
        operator changed the token's, or failing its signature). Left in place, it would refuse every
        save of the principal's new session as a conflict, for as long as the principal kept trying."""
        store = self.store
        assert store is not None
        try:
            current = await store.touch(key, self.settings.sessions.ttl_seconds)
        except StoreUnavailable as exc:
            raise self.health.down(exc) from None
        if session is not None:
            if (current or 0) == session.persistence.version or (not store.shared and current is not None):
                return session, None
            # Another replica changed it since (or it expired there): this copy is stale.
            await self.live.evict(key, session)
        if current is None:
            return None, None
        # Loading brings the state into memory while this call holds it: room first (session/memory.py).
        size = self.memory.size_of(key, store.size_hint(key))
        await self.memory.reserve(size)
        try:
            return await self._load(key, document_filter, owner, current)
        finally:
            self.memory.release(size)  # the state, if loaded, now counts as the live session's

    async def _load(
        self, key: SessionKey, document_filter: str | None, owner: str | None, current: int
    ) -> tuple[AnalysisSession | None, int | None]:
        """`key`'s kept version, registered live; or (None, version a new session may overwrite)."""
        assert self.store is not None
        try:
            stored = await self.store.load(key)
        except StoreUnavailable as exc:
            raise self.health.down(exc) from None
        except RecordRefused as refused:
            if key.kind is KeyKind.PRINCIPAL:  # the caller's own: a new session replaces it (with a note)
                return None, refused.version
            why = f"{_unknown(key.name)} (Its kept record was not loaded: {refused.reason}.)"
            raise SessionNotFoundError(why) from None
        if stored is None or stored.record.owner != owner or stored.record.document_filter != document_filter:
            if key.kind is KeyKind.PRINCIPAL:  # the caller's own (get() refused anyone else's)
                why = "fails its signature" if stored is None else "was kept under another document filter"
                log.warning("The kept session of %s %s; a new session replaces it", key.storage, why)
                return None, stored.version if stored is not None else current
            return None, None
        record = stored.record
        kept = self._persistence(key)
        kept.loaded(stored.version)
        kept.dump.remember(stored.split, stored.version)
        restored = AnalysisSession(
            self.kb,
            filter=document_filter,
            pool=self.pool,
            session_id=record.session_id,
            state=record.state,
            interpreter_state=stored.blob,
            owner=owner,
            persistence=kept,
        )
        await restored.start()
        self.live.register(key, restored, current_client(owner))
        self.locks.hold(restored, self._after_call)  # not dropped again before the call that loaded it gets it
        await self._enforce_capacity()
        log.debug("Loaded analysis session %s (version %d) from the session store", record.session_id, stored.version)
        return restored, None

    # ------------------------------------------------------ keeping (Keeper)

    async def commit(self, session: AnalysisSession) -> None:
        """After a call changed `session`: keep it (if worth keeping), compare-and-set on its version."""
        kept = session.persistence
        if not kept.kept and not session.worth_keeping:
            return
        if kept.in_store:
            assert self.writer is not None
            async with kept.commit_lock:
                try:
                    version = await self.writer.save(session)
                except SaveRefused:
                    await self.live.evict(kept.key, session)
                    raise
                kept.saved(version)
        else:
            kept.kept_in_memory()
        if not self.live.holds(kept.key, session):
            self.live.register(kept.key, session, current_client(session.owner))
        await self._enforce_capacity()  # also when an existing session grew

    def admit_state(self, session: AnalysisSession, size: int) -> str | None:
        return self.memory.admit(session, size)

    def room_for_charts(self, session: AnalysisSession) -> int | None:
        return self.memory.room_for_charts(session)

    # -------------------------------------------------------------- capacity

    async def _enforce_capacity(self) -> None:
        """At most `max_sessions` live sessions, and their states within the memory budget."""
        await self.live.enforce_count()
        await self.memory.drop_idle_copies()

    async def _after_call(self) -> None:
        """No request holds a session any more: drop what the bounds could not while one did, and
        let calls waiting for memory look again."""
        try:
            if len(self.live) > self.live.max_sessions or self.memory.exceeded:
                await self._enforce_capacity()
        except Exception:
            log.exception("Dropping idle sessions from memory failed")
        finally:
            self.memory.wake()

    async def drop(self, key: SessionKey) -> None:
        """End the session of `key`: out of memory and out of the store."""
        session = self.live.get(key)
        if session is not None:
            await self.live.evict(key, session)
            self.memory.wake()
        if self._kept_in_store(key):
            assert self.store is not None
            try:
                await self.store.delete(key)
            except StoreUnavailable as exc:
                log.warning("Could not delete session %s from the store: %s", key.storage, exc)

    async def expire(self) -> int:
        """Forget in-memory sessions idle past the TTL; expire the store's (local directory) files."""
        ttl = self.settings.sessions.ttl_seconds
        gone = await self.live.expire_idle(ttl)
        if self.store is not None:
            try:
                gone += await self.store.expire(ttl)
            except StoreUnavailable as exc:
                log.warning("Session expiry skipped: %s", exc)
        return gone


def _unknown(name: str) -> str:
    shown = label(name, 60)  # a handle is 26 characters; a client may send megabytes
    return (
        f"Unknown or expired analysis session {shown!r}. Call new_analysis (or omit `session`) to start "
        "a new one; variables of an expired session are gone."
    )
