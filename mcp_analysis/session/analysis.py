"""`AnalysisSession`: one client's analysis — state, filtered corpus and interpreter.

This is the single implementation behind every front door (MCP tools, the
pydantic-ai toolset, the CLI's `exec`, the Python API):

    async with AnalysisSession(kb, filter="uri LIKE '%report%'") as session:
        result = await session.execute("len(list(Path('/documents').iterdir()))")
"""

from __future__ import annotations

import secrets
import time
import weakref
from collections.abc import Callable
from typing import Any

from mcp_analysis.charts.models import Chart
from mcp_analysis.corpus import Corpus, KnowledgeBase
from mcp_analysis.errors import SandboxError
from mcp_analysis.sandbox.host import HostFunctions
from mcp_analysis.sandbox.interpreter import Interpreter
from mcp_analysis.sandbox.models import ExecutionResult
from mcp_analysis.sandbox.pool import WorkerPool
from mcp_analysis.sandbox.presentation import PRELUDE
from mcp_analysis.sandbox.vfs import DocumentsFS
from mcp_analysis.search.models import SearchResult
from mcp_analysis.session.citations import CiteOutcome, SeenIds, resolve_citations
from mcp_analysis.session.persistence import Persistence
from mcp_analysis.session.state import AnalysisState, CodeExecutionEntry
from mcp_analysis.store.models import DocumentMeta


def new_session_id() -> str:
    return "s_" + secrets.token_urlsafe(18)


class AnalysisSession:
    """See module docs. Use as an async context manager, or `start()`/`close()`."""

    def __init__(
        self,
        kb: KnowledgeBase,
        *,
        filter: str | None = None,
        pool: WorkerPool | None = None,
        session_id: str | None = None,
        state: AnalysisState | None = None,
        interpreter_state: bytes | None = None,
        owner: str | None = None,
        persistence: Persistence[AnalysisSession] | None = None,
    ) -> None:
        self.kb = kb
        self.id = session_id or new_session_id()
        self.owner = owner
        self.state = state or AnalysisState(document_filter=filter)
        if state is None:
            self.state.document_filter = filter
        self._pool = pool
        self._own_pool = pool is None
        self._interpreter_state = interpreter_state
        self.interpreter: Interpreter | None = None
        self.corpus: Corpus | None = None
        self.fs: DocumentsFS | None = None
        self.host: HostFunctions | None = None
        self.last_used = time.monotonic()
        # Given by a SessionManager: where the session is kept, and the keeper that writes it
        # through after every call that changed it (a failure there fails the call).
        self._persistence = persistence
        self._seen = SeenIds()  # chunk ids shown to this session, indexed for cite's repair

    # ---------------------------------------------------------------- lifecycle

    async def start(self) -> AnalysisSession:
        if self.corpus is not None:
            return self
        self.corpus = await self.kb.open_corpus(self.state.document_filter)
        if self._pool is None:
            self._pool = WorkerPool(self.kb.settings.sandbox)
            await self._pool.__aenter__()
        # Callbacks into this session are weak: a session the manager drops is freed at once
        # (its state may be tens of MB) instead of waiting for the cycle collector.
        self.interpreter = Interpreter(
            self._pool,
            self.kb.settings.sandbox,
            self._interpreter_state,
            on_state=_weak(self._interpreter_changed),
            prelude=PRELUDE,
            admit=_weak(self._admit_state),
            party=self.party,
        )
        self.fs = DocumentsFS(self.corpus)
        self.host = HostFunctions(
            self.corpus, self.kb.settings.search.sandbox_limit, _weak(self._record_search), self.party
        )
        return self

    async def close(self) -> None:
        if self.interpreter is not None:
            await self.interpreter.close()
        if self._own_pool and self._pool is not None:
            await self._pool.__aexit__(None, None, None)
            self._pool = None

    async def __aenter__(self) -> AnalysisSession:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def party(self) -> str:
        """Whom this session's calls run for, the unit shared workers and the renderer are fair to:
        its bearer token's principal (all of one token's sessions are one party), else itself."""
        return f"principal:{self.owner}" if self.owner else f"session:{self.id}"

    def notify(self, text: str) -> None:
        """A note for the client, shown before the stderr of the next execution."""
        if self.interpreter is not None:
            self.interpreter.notify(text)

    @property
    def persistence(self) -> Persistence[AnalysisSession]:
        """How its manager keeps this session (only sessions a SessionManager made have one)."""
        if self._persistence is None:
            raise RuntimeError("This AnalysisSession is not kept by a SessionManager.")
        return self._persistence

    def _admit_state(self, size: int) -> str | None:
        kept = self._persistence
        return kept.keeper.admit_state(self, size) if kept is not None else None

    def _interpreter_changed(self, state: bytes | None) -> None:
        self._interpreter_state = state

    @property
    def is_fresh(self) -> bool:
        """Nothing has happened in the current analysis yet."""
        state = self.state
        return not (state.executions or state.searches or state.citations or self._interpreter_state)

    @property
    def worth_keeping(self) -> bool:
        """Whether a later call could continue something only this session holds: variables or
        executions (execute_code ran) or registered citations. Search results alone are not: a
        search can be re-run, and its chunk ids can be cited from any session."""
        state = self.state
        return bool(self._interpreter_state or state.executions or state.citations or state.citation_index)

    @property
    def attached(self) -> bool:
        """Whether the interpreter holds a worker process now (not hibernated)."""
        return self.interpreter is not None and self.interpreter.attached

    @property
    def interpreter_state(self) -> bytes | None:
        return self._interpreter_state

    async def _changed(self) -> None:
        if self._persistence is not None:
            await self._persistence.keeper.commit(self)

    def _record_search(self, query: str, results: list[SearchResult]) -> None:
        self.state.record_search(query, results)

    def _ready(self) -> tuple[Corpus, Interpreter]:
        if self.corpus is None or self.interpreter is None:
            raise RuntimeError("AnalysisSession is not started; use `async with` or `await session.start()`.")
        self.last_used = time.monotonic()
        return self.corpus, self.interpreter

    # ------------------------------------------------------------------- tools

    async def execute(self, code: str) -> ExecutionResult:
        """Run Python in this session's interpreter; variables persist across calls."""
        _corpus, interpreter = self._ready()
        most = self.kb.settings.sandbox.max_code_chars
        if len(code) > most:  # kept twice (state and interpreter dump) and written through every call
            raise SandboxError(
                f"execute_code: the code is {len(code):,} characters; at most {most:,} (sandbox.max_code_chars). "
                "Keep data in variables across calls, or read it from /documents, instead of pasting it into code."
            )
        assert self.fs is not None and self.host is not None
        functions = self.host.mapping(first_chart=self.state.chart_counter + 1)
        result = await interpreter.execute(code, os_handler=self.fs, functions=functions)
        result.charts = self.host.charts.take()
        self.state.execution_counter += 1
        result.charts_not_kept = self._keep_charts(result.charts)
        self.state.record_execution(
            CodeExecutionEntry(
                index=self.state.execution_counter,
                code=code,
                **result.model_dump(include=set(CodeExecutionEntry.model_fields)),
            )
        )
        await self._changed()
        return result

    def _keep_charts(self, charts: list[Chart]) -> str | None:
        """Charts stay with the session within charts.max_kept / max_kept_mb, together with the
        variables within sandbox.max_state_mb, and in memory within what the server's budget leaves
        a session that lives only in memory (sessions.max_memory_mb): the oldest charts go first.
        Returns why charts of this call were not kept, when the server's budget is the reason."""
        settings = self.kb.settings
        variables = len(self._interpreter_state or b"")
        most_bytes = max(0, min(settings.charts.max_kept_mb * 2**20, settings.sandbox.max_state_mb * 2**20 - variables))
        kept = self._persistence
        room = kept.keeper.room_for_charts(self) if kept is not None and charts else None
        by_memory = self.state.record_charts(
            charts, self.state.execution_counter, settings.charts.max_kept, most_bytes, room
        )
        if by_memory and any(self.state.chart(c.index) is None for c in charts):
            return "the server's memory for analysis sessions is full, sessions.max_memory_mb"
        return None

    async def search(self, query: str, limit: int | None = None) -> list[SearchResult]:
        corpus, _ = self._ready()
        results = await corpus.search(query, limit)
        self._record_search(query, results)
        await self._changed()
        return results

    async def list_documents(self) -> list[DocumentMeta]:
        corpus, _ = self._ready()
        return await corpus.documents()

    async def cite(self, chunk_ids: list[str]) -> CiteOutcome:
        corpus, _ = self._ready()
        outcome = await resolve_citations(self.state, corpus, chunk_ids, self._seen)
        await self._changed()
        return outcome

    async def new_analysis(self) -> None:
        """Clear executions, citations, searches and variables; keep citation_index and the filter."""
        _, interpreter = self._ready()
        await interpreter.reset()
        self.state.start_new_analysis()
        self._seen = SeenIds()  # the cleared searches and executions are no longer "seen"
        await self._changed()


def _weak(method: Callable[..., Any]) -> Callable[..., Any]:
    """`method` without a strong reference to its object (None once the object is gone)."""
    ref = weakref.WeakMethod(method)

    def call(*args: Any) -> Any:
        target = ref()
        return target(*args) if target is not None else None

    return call
