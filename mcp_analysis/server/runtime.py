"""What a running server holds: the knowledge base, the worker pool, the sessions.

Started lazily in the background when the first connection opens (so `tools/list`
answers before LanceDB and the embedder are loaded), shared by every connection
and transport of one server object, and stopped when the last one closes. A
watcher notices documents added by another process and tells listening clients.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
from mcp.server.subscriptions import InMemorySubscriptionBus, ResourcesListChanged

from mcp_analysis.config import Settings
from mcp_analysis.errors import AnalysisError
from mcp_analysis.process_gc import imports_paused
from mcp_analysis.server.host_log import HostLog
from mcp_analysis.server.sdk_compat import connection_of
from mcp_analysis.server.updates import Change, DocumentUpdates
from mcp_analysis.session.keys import SessionKey  # light: no LanceDB or monty behind it

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from mcp_analysis.corpus import KnowledgeBase
    from mcp_analysis.sandbox.pool import WorkerPool
    from mcp_analysis.session.manager import SessionManager

log = logging.getLogger(__name__)

_WARM_UP_QUERY = "document"


class Runtime:
    #: Seconds a call waits for the server to finish starting before it is told to retry.
    startup_wait: float = 120.0

    def __init__(self, settings: Settings, bus: InMemorySubscriptionBus) -> None:
        self.settings = settings
        self.bus = bus
        self.kb: KnowledgeBase | None = None
        self.pool: WorkerPool | None = None
        self.sessions: SessionManager | None = None
        self.server_filter: str | None = None
        #: Opens the knowledge base (`KnowledgeBase` when None); `serve --sample` sets one that builds it first.
        self.opener: Any = None
        self._users = 0
        self._ready = anyio.Event()
        self._failure: BaseException | None = None
        self._stop = anyio.Event()
        self._idle = anyio.Event()
        self._legacy_connections: dict[int, Any] = {}
        #: Server events for the hosts' log panes (server/host_log.py).
        #: Who subscribed to which document, and what changed (server/updates.py).
        self.updates = DocumentUpdates()
        self.host_log = HostLog(
            lambda: self._legacy_connections.values(),
            settings.server.host_log_per_minute,
            may_name_files=settings.server.filter is None and settings.server.tokens_file is None,
        )
        #: Why the knowledge base cannot be read now (None while it can); for /healthz.
        self.kb_error: str | None = None
        self._changed = anyio.Event()  # set by a writer in this process: check the documents now
        self._written_here = False  # the next check follows a commit by this process's watcher
        #: Set once the background warm-up has finished (or given up); `warm_up_error` says why it gave up.
        self.warmed = anyio.Event()
        self.warm_up_error: str | None = None

    @asynccontextmanager
    async def use(self) -> AsyncIterator[Runtime]:
        """The first user starts the runtime in its own task and stops it after the last user left.

        (Task groups must be exited by the task that entered them, so the owner waits for
        later users instead of handing over.)
        """
        if self._users > 0:
            self._users += 1
            try:
                yield self
            finally:
                self._users -= 1
                if self._users == 0:
                    self._idle.set()
            return
        self._users = 1
        self._ready = anyio.Event()
        self._stop = anyio.Event()
        self._idle = anyio.Event()
        self._failure = None
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._run, tg)
            try:
                yield self
            finally:
                self._users -= 1
                with anyio.CancelScope(shield=True):
                    if self._users > 0:
                        await self._idle.wait()
                    self._stop.set()

    async def ready(self) -> Runtime:
        """Wait until started; re-raise a startup failure as a clear error, and a start that
        takes longer than `startup_wait` as one saying to retry (never a bare timeout).

        Once started it returns without awaiting: every call asks, twice, and a wait on a set
        event still yields to the event loop (~0.1 ms each on a busy loop)."""
        if not self._ready.is_set():
            await self._wait_started()
        if self._failure is not None:
            if isinstance(self._failure, AnalysisError):
                raise self._failure
            raise AnalysisError(f"The server could not start: {self._failure}")
        return self

    async def _wait_started(self) -> None:
        with anyio.move_on_after(self.startup_wait) as waited:
            await self._ready.wait()
        if waited.cancelled_caught:
            raise AnalysisError(
                f"The server is still starting (opening the knowledge base and loading its libraries "
                f"took over {self.startup_wait:.0f} s on this machine); nothing was run: retry in a moment."
            )

    def health(self) -> dict[str, Any]:
        """Readiness: knowledge base opened and readable, workers up, session store reachable."""
        sessions = self.sessions
        kb_problem = self.kb_error
        if self.kb is None:
            kb_problem = str(self._failure) if self._failure is not None else "opening"
        store_problem = sessions.health.error if sessions is not None else "not started"
        pool = self.pool
        checks = {
            "knowledge_base": kb_problem or "ok",
            "session_store": store_problem or "ok",
            "workers": "ok" if pool is not None else "not started",
        }
        return {
            "ready": all(v == "ok" for v in checks.values()),
            "checks": checks,
            "db": str(self.settings.db),
            "workers": {"size": pool.size, "in_use": pool.in_use} if pool is not None else None,
            "sessions": {"live": len(sessions), "stored": sessions.health.stored_count}
            if sessions is not None
            else None,
        }

    async def _run(self, background: TaskGroup) -> None:
        """Open everything, serve until the last user leaves, then close in order."""
        warming = anyio.CancelScope()  # the background warm-up of this run (a scope needs the event loop)
        telling = anyio.CancelScope()  # the hosts' log panes hear server events while this run lasts
        background.start_soon(self._tell_hosts, telling)
        self.warmed, self.warm_up_error = anyio.Event(), None
        try:
            # Heavy imports (LanceDB, monty, pydantic-ai) in a thread: the event loop keeps
            # answering tools/list and friends meanwhile.
            with imports_paused("runtime"):
                for module in ("mcp_analysis.corpus", "mcp_analysis.session.manager"):
                    await anyio.to_thread.run_sync(importlib.import_module, module)
            from mcp_analysis.corpus import KnowledgeBase
            from mcp_analysis.sandbox.pool import WorkerPool
            from mcp_analysis.session.manager import SessionManager

            kb = await self._open_knowledge_base(self.opener or KnowledgeBase)
            self.server_filter = await kb.store.validate_filter(self.settings.server.filter)
            self.kb = kb
            # The embedder and the indexes load while the workers start, not after.
            background.start_soon(self._warm_up, kb, warming)
            async with WorkerPool(self.settings.sandbox) as pool, SessionManager(kb, pool, self.settings) as sessions:
                self.pool, self.sessions = pool, sessions
                self._ready.set()
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._poll_versions, kb)
                    await self._stop.wait()
                    tg.cancel_scope.cancel()
            warming.cancel()
            with anyio.move_on_after(30):  # a load in a thread cannot be abandoned: let it end first
                await self.warmed.wait()
            await kb.close()
        except Exception as exc:
            self._failure = exc
            if isinstance(exc, AnalysisError):  # the user can fix it (no knowledge base yet); the server serves on
                log.warning("Serving, but every tool call answers with this until it is fixed: %s", exc)
            else:
                log.error("Server startup failed: %s", exc)
            self._ready.set()
            await self._stop.wait()
        finally:
            warming.cancel()
            telling.cancel()
            self.sessions = None
            self.pool = None

    async def _open_knowledge_base(self, opener: Any) -> KnowledgeBase:
        """Open the knowledge base; while its object store is unreachable, report that and retry."""
        from mcp_analysis.errors import StorageUnavailableError

        delay = 1.0
        while True:
            try:
                kb = await opener.open(self.settings)
            except StorageUnavailableError as exc:
                if self._failure is None:
                    log.warning("%s Retrying in the background.", exc)
                self._failure, self.kb_error = exc, str(exc)
                self._ready.set()  # calls get the clear error meanwhile
                with anyio.move_on_after(delay):
                    await self._stop.wait()
                if self._stop.is_set():
                    raise
                delay = min(delay * 2, 15.0)
                continue
            if self._failure is not None:
                log.info("The knowledge base at %s is reachable again", self.settings.db)
            self._failure, self.kb_error = None, None
            return kb

    async def _tell_hosts(self, scope: anyio.CancelScope) -> None:
        with scope, self.host_log.attached():
            await self.host_log.run()

    async def _warm_up(self, kb: KnowledgeBase, scope: anyio.CancelScope) -> None:
        """Load the embedder and the search indexes now, so the first search does not pay for them.

        One search for a word loads what every search needs (the embedding session, LanceDB's
        vector and full-text indexes, the document list) and no more; it runs once, in the
        background, and never fails the server. A client's search begun meanwhile loads the same,
        so the warm-up search is then left out rather than run beside it.
        """
        with scope:
            try:
                await self._load_search(kb)
            finally:
                self.warmed.set()

    async def _load_search(self, kb: KnowledgeBase) -> None:
        try:
            await kb.embedder()
        except Exception as exc:  # reported again, clearly, by the first search
            log.warning("Embedder warm-up failed: %s", exc)
            self.warm_up_error = str(exc)
            return
        if kb.searched:  # a client's search is loading the indexes already: do not compete with it
            return
        try:
            corpus = await kb.open_corpus(self.server_filter)
            await corpus.search(_WARM_UP_QUERY, limit=1)
        except Exception as exc:  # an empty or keyword-only knowledge base: the first search says why
            log.debug("Search warm-up skipped: %s", exc)
            self.warm_up_error = str(exc)

    def remember_legacy_session(self, session: Any) -> None:
        """Handshake-era connections get list-changed notifications on their own stream.

        The connection (not the per-request session object) is kept until it closes.
        """
        connection = connection_of(session)
        if connection is None or id(connection) in self._legacy_connections:
            return
        self._legacy_connections[id(connection)] = connection
        connection.exit_stack.callback(self._legacy_connections.pop, id(connection), None)
        if connection.session_id:
            # The client ended its HTTP session (DELETE or idle timeout): free its analysis now.
            connection.exit_stack.push_async_callback(self._forget_http_session, connection.session_id)

    async def _forget_http_session(self, session_id: str) -> None:
        if self.sessions is not None:
            await self.sessions.drop(SessionKey.http(session_id))
            log.debug("Closed the analysis session of ended HTTP session %s", session_id)

    async def _poll_versions(self, kb: KnowledgeBase) -> None:
        """Notice documents added by other processes (within `server.watch_interval` plus LanceDB's 1 s
        read consistency interval) by polling the tables' version; a failing read marks the knowledge
        base unready until one succeeds. Folders are followed by watch/, not here."""
        last: int | None = None
        while True:
            try:
                # Right after a commit by this process's watcher, read the tables at their latest
                # version now rather than once LanceDB's read-consistency interval (1 s) has passed.
                version = await kb.refresh(latest=self._written_here)
            except Exception as exc:
                if self.kb_error is None:
                    log.warning("The knowledge base at %s cannot be read: %s", self.settings.db, exc)
                self.kb_error = " ".join(str(exc).split())[:500] or type(exc).__name__
                await self._nap()
                continue
            if self.kb_error is not None:
                log.info("The knowledge base at %s is readable again", self.settings.db)
                self.kb_error = None
            if last is None or version == last:
                if last is None:
                    await self._changed_documents(kb)  # the first look, to compare later ones with
                last = version
                await self._nap()
                continue
            last = version
            log.info(
                "Documents changed (version %s); notifying clients (%d handshake-era connections)",
                version,
                len(self._legacy_connections),
            )
            await self.bus.publish(ResourcesListChanged())
            for connection in list(self._legacy_connections.values()):
                # Best effort, never raises; a closed connection leaves the table via its exit stack.
                await connection.notify("notifications/resources/list_changed", None)
            changes = await self._changed_documents(kb)
            await self.updates.tell(changes, self._legacy_connections.values(), self.bus, self._visible_in(kb))
            await self._nap()

    @staticmethod
    def _visible_in(kb: KnowledgeBase) -> Any:
        async def visible(document_filter: str | None, document_id: str) -> bool:
            return await kb.corpus(document_filter).find(document_id) is not None

        return visible

    async def _changed_documents(self, kb: KnowledgeBase) -> list[Change]:
        try:
            return self.updates.changed(await kb.corpus(self.server_filter).documents())
        except Exception as exc:  # subscribers miss this change; the next one compares with the last look
            log.warning("Could not compare the documents for subscribers: %s", exc)
            return []

    def documents_changed(self) -> None:
        """A writer in this process (a folder watcher) committed: check now, not at the next interval."""
        self._changed.set()

    async def _nap(self) -> None:
        """Sleep `watch_interval`, or until `documents_changed`: then the next check reads the tables
        at their latest version, so that commit is seen at once (no second check a read-consistency
        interval later is needed)."""
        with anyio.move_on_after(self.settings.server.watch_interval):
            await self._changed.wait()
        self._written_here = self._changed.is_set()
        if self._written_here:
            self._changed = anyio.Event()
