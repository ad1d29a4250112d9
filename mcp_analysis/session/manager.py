"""Analysis sessions by client key: created on demand, kept in a store, expired when idle.

Keys name the client (see server/identity.py): ``local`` (stdio / in-memory),
``http:<mcp-session-id>`` (legacy HTTP), ``principal:<name>`` (bearer token) and
``handle:<session id>`` (server-issued handles for sessionless clients). Sessions
keyed by handle or principal are *kept* in the session store (state + interpreter
dump) — a local directory, or Redis shared by replicas — so they survive restarts
and continue on any replica; the others end with their connection anyway.

Only sessions worth keeping are kept (`AnalysisSession.worth_keeping`: variables,
executions or citations); an anonymous sessionless call that only searched or listed
leaves nothing behind. Its handle is signed, so when a client passes it back the
server starts afresh under it (nothing was lost) instead of reporting it expired.

Every change is written through to the store at the end of the call that made it,
compare-and-set on a version number: a copy that another call (on another replica)
has overtaken cannot overwrite newer state, and each call on a shared store starts
by checking that its in-memory copy is the latest. With a shared store, each MCP
request holds the session's lease lock for its duration (`call_scope`): two replicas
never run one session at once; a second call waits up to `sessions.lock_timeout`,
then gets a clear retryable error.

A session remembers its owner (the authenticated principal, if any) and its
filter; a key presented by another owner, or with another filter, is refused as
unknown, so one client can never reach another's variables or citations.
"""

from __future__ import annotations

import logging
import re
import secrets
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio

from mcp_analysis.config import Settings, data_home
from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.errors import SessionBusyError, SessionLimitError, SessionNotFoundError, SessionStoreError
from mcp_analysis.sandbox.pool import WorkerPool
from mcp_analysis.search.excerpt import label
from mcp_analysis.session.analysis import AnalysisSession, new_session_id
from mcp_analysis.session.scope import current_scope
from mcp_analysis.session.store import (
    Limits,
    LockTimeout,
    SessionRecord,
    SessionStore,
    Signer,
    StoreFull,
    StoreUnavailable,
    VersionConflict,
    open_session_store,
    store_namespace,
)

log = logging.getLogger(__name__)

PERSISTED_PREFIXES = ("handle:", "principal:")
_TICK_SECONDS = 1.0
_LOCK_RENEW_SECONDS = 3.0
_HEALTH_SECONDS = 2.0
_COUNT_SECONDS = 10.0
_HANDLE = re.compile(r"s_[A-Za-z0-9_-]{16,40}")  # what new_handle() and new_session_id() make
REPLACED_NOTICE = (
    "Note: your earlier analysis session was kept under another document filter (or could not be "
    "verified) and was not restored; this is a new session.\n"
)


def default_sessions_dir(settings: Settings) -> Path:
    return data_home() / "sessions" / store_namespace(settings)


# --------------------------------------------------------------------- manager


class SessionManager:
    def __init__(
        self, kb: KnowledgeBase, pool: WorkerPool, settings: Settings, store: SessionStore | str | None = "default"
    ) -> None:
        self.kb = kb
        self.pool = pool
        self.settings = settings
        if store == "default":
            try:
                store = open_session_store(settings, default_sessions_dir(settings))
            except OSError as exc:
                log.warning("Session persistence disabled: cannot use the session directory (%s)", exc)
                store = None
        assert not isinstance(store, str)
        self.store: SessionStore | None = store
        self.signer = store.signer if store is not None else Signer(secrets.token_bytes(32))
        self._sessions: dict[str, AnalysisSession] = {}
        self._by_id: dict[str, str] = {}
        self._key_locks: dict[str, tuple[anyio.Lock, int]] = {}
        self._task_group: Any = None
        #: Why the session store is failing (None while it answers); read by /healthz.
        self.store_error: str | None = None
        self.stored_count = 0
        self.lock_waits = 0
        self.memory_evictions = 0  # idle kept sessions dropped from memory by the budget

    async def __aenter__(self) -> SessionManager:
        self._task_group = anyio.create_task_group()
        await self._task_group.__aenter__()
        self._task_group.start_soon(self._maintenance_loop)
        if self.store is not None and self.store.shared:
            await self.check_store()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task_group is not None:
            self._task_group.cancel_scope.cancel()
            await self._task_group.__aexit__(None, None, None)
        with anyio.CancelScope(shield=True):
            for session in list(self._sessions.values()):
                await session.close()
            self._sessions.clear()
            self._by_id.clear()
            if self.store is not None:
                await self.store.close()

    def __len__(self) -> int:
        return len(self._sessions)

    @property
    def attached(self) -> int:
        """Live sessions whose interpreter holds a worker now."""
        return sum(1 for s in self._sessions.values() if s.attached)

    def _limits(self, owner: str | None) -> Limits:
        # Anonymous clients are not one principal: without tokens the server cannot tell
        # them apart (and with tokens there are none), so only the total bounds them.
        s = self.settings.sessions
        per_principal = s.max_per_principal if owner is not None else s.max_stored
        # At least one session's largest state: below it, "the store is full" would never clear.
        stored_mb = max(s.max_stored_mb, self.settings.sandbox.max_state_mb)
        return Limits(s.ttl_seconds, s.max_stored, per_principal, stored_mb * 1024 * 1024)

    def _kept_in_store(self, key: str) -> bool:
        return self.store is not None and key.startswith(PERSISTED_PREFIXES)

    def _stored_copy(self, key: str, session: AnalysisSession) -> bool:
        """Whether memory holds only a copy of `session` (it is in the store): droppable when idle."""
        return session.kept and self._kept_in_store(key)

    # ------------------------------------------------------------------ lookup

    async def get(
        self, key: str, *, document_filter: str | None, owner: str | None = None, create: bool = True
    ) -> AnalysisSession:
        """The session for `key`: the latest kept version, or a new one if allowed."""
        live = self._sessions.get(key)
        if (key.startswith("principal:") and key != f"principal:{owner}") or (live is not None and live.owner != owner):
            # Refused before taking the session's lock: another client's calls must not hold it.
            raise SessionNotFoundError(self._unknown(key))
        if self._kept_in_store(key):
            await self._lock_for_call(key)
        async with self._key_lock(key):
            session = self._sessions.get(key)
            if session is not None and (session.owner != owner or session.state.document_filter != document_filter):
                raise SessionNotFoundError(self._unknown(key))
            replaced: int | None = None
            if self._kept_in_store(key):
                session, replaced = await self._sync(key, session, document_filter, owner)
            if session is None:
                if not create:
                    raise SessionNotFoundError(self._unknown(key))
                session_id = self._new_id(key, owner)
                session = await self._new(key, session_id, document_filter, owner)
                if replaced is not None:  # the first save overwrites the unusable kept version
                    session.version = replaced
                    session.notify(REPLACED_NOTICE)
                if not key.startswith("handle:"):
                    self._register(key, session)
                    await self._enforce_capacity()
            session.last_used = time.monotonic()
            self._hold(session)
            return session

    async def create_handle(self, *, document_filter: str | None, owner: str | None) -> AnalysisSession:
        """A new session addressed by a server-issued handle (sessionless clients).

        It is only registered and kept once it holds something worth keeping."""
        handle = self.signer.new_handle(owner)
        return await self._new(f"handle:{handle}", handle, document_filter, owner)

    def _new_id(self, key: str, owner: str | None) -> str:
        """The public id of a new session. Only ids of sessions that can outlive their client's
        connection are signed: a signed id that was never kept starts afresh when passed back,
        while the id of an ended legacy HTTP session must stay unknown, not come back empty."""
        if key.startswith("handle:"):
            return key.removeprefix("handle:")
        if key.startswith("http:"):
            return new_session_id()
        return self.signer.new_handle(owner)

    async def resolve(
        self, handle: str, *, owner: str | None, document_filter: str | None, fresh: bool = True
    ) -> AnalysisSession:
        """The session a client names by its public id (the `session` argument).

        An id this deployment issued for a session that was never kept (nothing worth keeping
        happened in it) starts a fresh session under that id, when `fresh`."""
        if not _HANDLE.fullmatch(handle):  # never a store key: a client may send megabytes
            raise SessionNotFoundError(self._unknown(handle))
        key = self._by_id.get(handle)
        if key is not None and not key.startswith("handle:"):
            try:
                session = await self.get(key, document_filter=document_filter, owner=owner, create=False)
            except SessionNotFoundError:  # named by the handle given, not by whose key it is
                raise SessionNotFoundError(self._unknown(handle)) from None
            if session.id == handle:
                return session
            raise SessionNotFoundError(self._unknown(handle))
        if owner is not None and key is None:
            # A principal's own session, perhaps last used on another replica.
            try:
                mine = await self.get(f"principal:{owner}", document_filter=document_filter, owner=owner, create=False)
            except SessionNotFoundError:
                mine = None
            if mine is not None and mine.id == handle:
                return mine
        key = f"handle:{handle}"
        try:
            return await self.get(key, document_filter=document_filter, owner=owner, create=False)
        except SessionNotFoundError:
            if not fresh or not self.signer.issued(handle, owner) or await self._was_kept(key):
                raise
        return await self._new(key, handle, document_filter, owner)

    def by_id(self, session_id: str, owner: str | None) -> AnalysisSession | None:
        """A live session in this process by its public id, if `owner` may see it."""
        key = self._by_id.get(session_id)
        session = self._sessions.get(key) if key else None
        if session is None or session.owner != owner:
            return None
        return session

    @staticmethod
    def _unknown(key: str) -> str:
        shown = label(key.split(":", 1)[-1], 60)  # a handle is 26 characters; a client may send megabytes
        return (
            f"Unknown or expired analysis session {shown!r}. Call new_analysis (or omit `session`) to start "
            "a new one; variables of an expired session are gone."
        )

    @asynccontextmanager
    async def _key_lock(self, key: str) -> AsyncIterator[None]:
        lock, users = self._key_locks.get(key) or (anyio.Lock(), 0)
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

    async def _was_kept(self, key: str) -> bool:
        if self.store is None:
            return False
        try:
            return await self.store.was_kept(key)
        except StoreUnavailable as exc:
            raise self._store_down(exc) from None

    async def _new(self, key: str, session_id: str, document_filter: str | None, owner: str | None) -> AnalysisSession:
        session = AnalysisSession(self.kb, filter=document_filter, pool=self.pool, session_id=session_id, owner=owner)
        return await self._started(key, session)

    async def _started(self, key: str, session: AnalysisSession) -> AnalysisSession:
        """`session`, new or loaded from the store, wired to this manager under `key` and started."""
        session.key = key
        session.on_change = self._commit
        session.state_budget = self._admit_state
        await session.start()
        return session

    # --------------------------------------------------------- shared stores

    async def _lock_for_call(self, key: str) -> None:
        """Shared store, inside a request: hold the session's lock until the request ends."""
        scope = current_scope()
        store = self.store
        if scope is None or store is None or not store.shared or key in scope.held:
            return
        try:
            token = await store.acquire(key, wait=self.settings.sessions.lock_timeout)
        except LockTimeout:
            self.lock_waits += 1
            raise SessionBusyError(
                f"Analysis session {key.split(':', 1)[-1]!r} is busy: another call on it is still running "
                f"(maybe on another server replica) after {self.settings.sessions.lock_timeout:g} s "
                "(sessions.lock_timeout). Retry this call when that one has finished."
            ) from None
        except StoreUnavailable as exc:
            raise self._store_down(exc) from None
        scope.held[key] = token

        async def release() -> None:
            try:
                await store.release(key, token)
            except StoreUnavailable as exc:  # the lease lapses by itself
                log.warning("Could not release the lock of %s: %s", key, exc)

        scope.releases.append(release)

    async def _sync(
        self, key: str, session: AnalysisSession | None, document_filter: str | None, owner: str | None
    ) -> tuple[AnalysisSession | None, int | None]:
        """The latest kept version of `key`: the live copy if current, else loaded from the store.

        Also the version of a kept record that a new session may overwrite: a principal's own key
        whose record is unusable for this call (kept under another document filter after the
        operator changed the token's, or failing its signature). Left in place, it refused every
        save of the principal's new session as a conflict, for as long as the principal kept trying."""
        store = self.store
        assert store is not None
        try:
            current = await store.touch(key, self.settings.sessions.ttl_seconds)
        except StoreUnavailable as exc:
            raise self._store_down(exc) from None
        if session is not None:
            if (current or 0) == session.version or (not store.shared and current is not None):
                return session, None
            # Another replica changed it since (or it expired there): this copy is stale.
            await self._evict(key, session)
        if current is None:
            return None, None
        try:
            stored = await store.load(key)
        except StoreUnavailable as exc:
            raise self._store_down(exc) from None
        if stored is None or stored.record.owner != owner or stored.record.document_filter != document_filter:
            if key == f"principal:{owner}":
                why = "fails its signature" if stored is None else "was kept under another document filter"
                log.warning("The kept session of %s %s; a new session replaces it", key, why)
                return None, stored.version if stored is not None else current
            return None, None
        record = stored.record
        restored = AnalysisSession(
            self.kb,
            filter=document_filter,
            pool=self.pool,
            session_id=record.session_id,
            state=record.state,
            interpreter_state=stored.blob,
            owner=owner,
        )
        restored.version, restored.kept = stored.version, True
        await self._started(key, restored)
        self._register(key, restored)
        self._hold(restored)  # not dropped again before the call that loaded it gets it
        await self._enforce_capacity()
        log.debug("Loaded analysis session %s (version %d) from the session store", record.session_id, stored.version)
        return restored, None

    def _hold(self, session: AnalysisSession) -> None:
        """Keep `session` in memory until the current request ends (`_busy`). Dropped while a
        call holds it (searching, or before its code runs), a parallel call on the same session
        loaded a second copy, and one of the two failed as changed by another call."""
        scope = current_scope()
        if scope is None or any(held is session for held in scope.sessions):
            return
        scope.sessions.append(session)
        session.calls += 1

        async def release() -> None:
            session.calls -= 1
            if not session.calls and self.state_bytes > self._memory_budget:
                try:  # what the budget could not drop while calls held it
                    await self._enforce_capacity()
                except Exception:
                    log.exception("Dropping idle sessions from memory failed")

        scope.releases.append(release)

    def _store_down(self, exc: Exception) -> SessionStoreError:
        where = self.store.description if self.store is not None else "the session store"
        self.store_error = str(exc)
        return SessionStoreError(
            f"The session store ({where}) cannot be reached right now ({exc}); analysis sessions are unavailable. "
            "Retry shortly."
        )

    # ---------------------------------------------------------------- commit

    async def _commit(self, session: AnalysisSession) -> None:
        """After a call changed `session`: keep it (if worth keeping), compare-and-set on its version."""
        key = session.key
        if key is None or (not session.kept and not session.worth_keeping):
            return
        if self._kept_in_store(key):
            assert self.store is not None
            async with session.commit_lock:
                record = SessionRecord(
                    key=key,
                    session_id=session.id,
                    owner=session.owner,
                    document_filter=session.state.document_filter,
                    state=session.state,
                    last_used=time.time(),
                )
                try:
                    version = await self.store.save(
                        record, session.interpreter_state, expected=session.version, limits=self._limits(session.owner)
                    )
                except VersionConflict:
                    await self._evict(key, session)
                    raise SessionBusyError(
                        f"Analysis session {session.id!r} was changed by another call (maybe on another server "
                        "replica) while this one ran; this call's effects were discarded. Retry the call."
                    ) from None
                except StoreFull as full:
                    await self._evict(key, session)
                    raise SessionLimitError(self._full_message(full, session)) from None
                except StoreUnavailable as exc:
                    await self._evict(key, session)
                    raise SessionStoreError(
                        f"This call's effects could not be saved: the session store "
                        f"({self.store.description}) cannot be reached ({exc}). The session is as it was before "
                        "this call; retry shortly."
                    ) from None
                session.version = version
        session.kept = True
        if self._sessions.get(key) is not session:
            self._register(key, session)
        await self._enforce_capacity()  # also when an existing session grew

    def _full_message(self, full: StoreFull, session: AnalysisSession) -> str:
        if full.scope == "principal":
            return (
                f"Too many analysis sessions kept for principal {session.owner!r} (limit {full.limit}, "
                "sessions.max_per_principal); this call's effects were not kept. Continue an existing session "
                "(pass its `session` handle) or wait for idle ones to expire "
                f"(sessions.ttl_seconds = {self.settings.sessions.ttl_seconds:g})."
            )
        if full.scope == "bytes":
            return (
                f"The session store is full: the sessions it keeps would take more than {full.limit // 2**20:,} MB "
                "(sessions.max_stored_mb) with this call's state; this call's effects were not kept. Keep less in "
                "variables (del the large ones), start a new analysis, or retry after idle sessions expire "
                f"(sessions.ttl_seconds = {self.settings.sessions.ttl_seconds:g})."
            )
        return (
            f"The server keeps too many analysis sessions (limit {full.limit}, sessions.max_stored); this call's "
            "effects were not kept. Continue an existing session (pass its `session` handle) or retry after idle "
            f"sessions expire (sessions.ttl_seconds = {self.settings.sessions.ttl_seconds:g})."
        )

    # ------------------------------------------------------------- lifecycle

    def _register(self, key: str, session: AnalysisSession) -> None:
        self._sessions[key] = session
        self._by_id[session.id] = key

    async def _evict(self, key: str, session: AnalysisSession) -> None:
        """Forget the in-memory copy (the store keeps what was kept)."""
        if self._sessions.get(key) is session:
            self._sessions.pop(key, None)
            self._by_id.pop(session.id, None)
        await session.close()

    async def drop(self, key: str) -> None:
        session = self._sessions.get(key)
        if session is not None:
            await self._evict(key, session)
        if self._kept_in_store(key):
            assert self.store is not None
            try:
                await self.store.delete(key)
            except StoreUnavailable as exc:
                log.warning("Could not delete session %s from the store: %s", key, exc)

    @property
    def state_bytes(self) -> int:
        """Interpreter state held in memory by the live sessions."""
        return sum(_state_size(s) for s in self._sessions.values())

    @property
    def _memory_budget(self) -> int:
        mb = max(self.settings.sessions.max_memory_mb, self.settings.sandbox.max_state_mb)
        return mb * 1024 * 1024

    def _admit_state(self, session: AnalysisSession, size: int) -> str | None:
        """Whether `session` may keep a state of `size` bytes (asked before it is kept).

        A session kept in the store always may: beyond the budget, idle ones are dropped from
        memory and reloaded on their next call (`_enforce_capacity`). Sessions that only live
        in memory cannot be dropped without losing them, so they share the budget and the call
        that would pass it keeps nothing (its result says so; earlier variables stay)."""
        if session.key is not None and self._kept_in_store(session.key):
            return None
        held = sum(
            _state_size(s) for key, s in self._sessions.items() if s is not session and not self._stored_copy(key, s)
        )
        budget = self._memory_budget
        if held + size <= budget:
            return None
        return (
            f"the server's memory for analysis sessions is full ({held / 2**20:,.0f} MB held by sessions that "
            f"live only in memory, this state {size / 2**20:,.0f} MB, budget {budget // 2**20} MB, "
            "sessions.max_memory_mb)"
        )

    async def _enforce_capacity(self) -> None:
        """At most `max_sessions` live sessions, and their states within the memory budget:
        the least recently used idle ones are dropped from memory (kept ones are in the store)."""
        limit = self.settings.sessions.max_sessions
        if len(self._sessions) > limit:
            for key, session in sorted(self._sessions.items(), key=lambda kv: kv[1].last_used):
                if len(self._sessions) <= limit:
                    break
                if _busy(session):
                    continue
                await self._evict(key, session)  # kept sessions are in the store already
        held, budget = self.state_bytes, self._memory_budget
        if held <= budget:
            return
        for key, session in sorted(self._sessions.items(), key=lambda kv: kv[1].last_used):
            if held <= budget:
                break
            if _busy(session) or not self._stored_copy(key, session) or not _state_size(session):
                continue
            held -= _state_size(session)
            await self._evict(key, session)
            self.memory_evictions += 1

    async def expire(self) -> int:
        """Forget in-memory sessions idle past the TTL; expire the store's (local directory) files."""
        ttl = self.settings.sessions.ttl_seconds
        cutoff = time.monotonic() - ttl
        gone = 0
        for key, session in list(self._sessions.items()):
            if session.last_used < cutoff and not _busy(session):
                await self._evict(key, session)
                gone += 1
        if self.store is not None:
            try:
                gone += await self.store.expire(ttl)
            except StoreUnavailable as exc:
                log.warning("Session expiry skipped: %s", exc)
        return gone

    async def check_store(self) -> bool:
        """Ping the store; remember the failure for readiness. True when it answers."""
        if self.store is None:
            return True
        try:
            await self.store.ping()
        except StoreUnavailable as exc:
            if self.store_error is None:
                log.warning("Session store unavailable: %s", exc)
            self.store_error = str(exc)
            return False
        if self.store_error is not None:
            log.info("Session store %s is reachable again", self.store.description)
        self.store_error = None
        return True

    async def _maintenance_loop(self) -> None:
        last = {"expiry": time.monotonic(), "renew": 0.0, "health": 0.0, "count": 0.0}
        while True:
            await anyio.sleep(_TICK_SECONDS)
            now = time.monotonic()
            try:
                store = self.store
                if store is not None and store.shared:
                    if now - last["renew"] >= _LOCK_RENEW_SECONDS:
                        last["renew"] = now
                        await store.renew_locks()
                    if now - last["health"] >= _HEALTH_SECONDS:
                        last["health"] = now
                        await self.check_store()
                if store is not None and now - last["count"] >= _COUNT_SECONDS:
                    last["count"] = now
                    self.stored_count = await store.count()
                if now - last["expiry"] > min(60.0, self.settings.sessions.ttl_seconds / 2):
                    last["expiry"] = now
                    removed = await self.expire()
                    if removed:
                        log.info("Expired %d idle analysis session(s)", removed)
            except StoreUnavailable as exc:
                self.store_error = str(exc)
            except Exception:  # maintenance must never take the server down
                log.exception("Session maintenance failed")


def _state_size(session: AnalysisSession) -> int:
    state = session.interpreter_state
    return len(state) if state is not None else 0


def _busy(session: AnalysisSession) -> bool:
    if session.calls or session.commit_lock.locked():
        return True
    return session.interpreter is not None and not session.interpreter.is_idle
