"""The analysis tools as a pydantic-ai toolset: the same `AnalysisSession` the MCP server uses.

    toolset = create_toolset(session)                    # an AnalysisSession you manage
    toolset = create_toolset(db_path="kb.lancedb", filter="uri LIKE '%report%'")  # opened on use
    agent = Agent("openai:gpt-4o", toolsets=[toolset, my_other_tools])

Each agent run is one analysis (the reference semantics): the interpreter starts
empty, executions/citations/searches are cleared; the citation index accumulates.
After `max_executions` code runs the tool tells the model to answer with what it has.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic_ai import ModelRetry
from pydantic_ai.toolsets import FunctionToolset

from mcp_analysis.config import Settings, load_settings, with_db
from mcp_analysis.errors import AnalysisError
from mcp_analysis.search.models import SearchHit
from mcp_analysis.session.analysis import AnalysisSession
from mcp_analysis.tooling import descriptions as text
from mcp_analysis.tooling.citing import CitationOut
from mcp_analysis.tooling.descriptions import ChunkIds, Code, HitLimit, PageOffset, PageSize, PassageChars, Query
from mcp_analysis.tooling.document_list import DocumentInfo

#: Documents per list_documents page for an agent: in one call for any knowledge base an agent reads whole.
AGENT_DOCUMENTS_PAGE = 1000


class AnalysisToolset(FunctionToolset[Any]):
    """search, list_documents, execute_code and cite over one AnalysisSession."""

    def __init__(
        self,
        session: AnalysisSession | None = None,
        *,
        settings: Settings | None = None,
        document_filter: str | None = None,
        max_executions: int | None = None,
        reset_per_run: bool = True,
    ) -> None:
        super().__init__(instructions=text.INSTRUCTIONS, max_retries=3)
        self.session = session
        self._settings = settings
        self._filter = document_filter
        self._owned: tuple[Any, AnalysisSession] | None = None
        self._entered = 0
        self.reset_per_run = reset_per_run
        base = settings or (session.kb.settings if session else None)
        self.max_executions = max_executions or (base.analysis.max_executions if base else 15)
        # The same descriptions and argument types as the MCP server's tools (mcp_analysis.tooling).
        self.add_function(self.search, name="search", description=text.SEARCH)
        self.add_function(self.list_documents, name="list_documents", description=text.LIST_DOCUMENTS)
        self.add_function(self.execute_code, name="execute_code", description=text.EXECUTE_CODE)
        self.add_function(self.cite, name="cite", description=text.CITE)

    async def __aenter__(self) -> AnalysisToolset:
        self._entered += 1
        if self._entered == 1:
            if self.session is None:
                from mcp_analysis.corpus import KnowledgeBase

                kb = await KnowledgeBase.open(self._settings or load_settings())
                session = await AnalysisSession(kb, filter=self._filter).start()
                self._owned = (kb, session)
                self.session = session
            elif self.reset_per_run and not self.session.is_fresh:
                await self.session.new_analysis()
        return self

    async def __aexit__(self, *args: Any) -> bool | None:
        self._entered -= 1
        if self._entered == 0 and self._owned is not None:
            kb, session = self._owned
            await session.close()
            await kb.close()
            self._owned = None
            self.session = None
        return None

    def _session(self) -> AnalysisSession:
        if self.session is None:
            raise RuntimeError("The analysis toolset is used outside an agent run (enter it first).")
        return self.session

    async def search(self, query: Query, limit: HitLimit = None, context: PassageChars = None) -> list[dict[str, Any]]:
        """Hits as `SearchHit` dicts, passages of `context` characters on average (the best hits get more)."""
        session = self._session()
        try:
            results = await session.search(query, limit)
        except AnalysisError as exc:
            raise ModelRetry(str(exc)) from None
        chars = context or session.kb.settings.search.context_chars
        return [hit.model_dump() for hit in SearchHit.all_of(results, query, chars)]

    async def list_documents(
        self, offset: PageOffset = 0, limit: PageSize = AGENT_DOCUMENTS_PAGE
    ) -> list[dict[str, Any]]:
        """A page of documents as `DocumentInfo` dicts (metadata only when there is some)."""
        documents = await self._session().list_documents()
        return [DocumentInfo.of(d).model_dump(exclude_defaults=True) for d in documents[offset : offset + limit]]

    async def execute_code(self, code: Code) -> dict[str, Any]:
        """The run's output fields that are set; a refusal once `max_executions` is reached."""
        session = self._session()
        if len(session.state.executions) >= self.max_executions:
            return {
                "success": False,
                "error": f"The limit of {self.max_executions} code executions for this analysis is reached. "
                "Do not call execute_code again: answer now with what you have found, and cite it.",
            }
        try:
            result = await session.execute(code)
        except AnalysisError as exc:
            return {"success": False, "error": str(exc)}
        out: dict[str, Any] = {"success": result.success}
        for key in ("stdout", "stderr", "value", "error"):
            value = getattr(result, key)
            if value:
                out[key] = value
        if result.truncated:
            out["note"] = "output was truncated; print a smaller summary"
        if result.charts:
            out["charts"] = [c.summary() for c in result.charts]
        return out

    async def cite(self, chunk_ids: ChunkIds) -> dict[str, Any]:
        """The citations as `CitationOut` dicts, with the repaired and the unknown ids."""
        try:
            outcome = await self._session().cite(chunk_ids)
        except AnalysisError as exc:
            raise ModelRetry(str(exc)) from None
        if outcome.no_evidence:
            return {"cited": [], "note": "recorded: no knowledge-base evidence"}
        return {
            "cited": [CitationOut.of(c).model_dump() for c in outcome.citations],
            "repaired": outcome.repaired,
            "ignored": outcome.ignored,
        }


def create_toolset(
    session: AnalysisSession | None = None,
    *,
    db_path: str | Path | None = None,
    config: Settings | None = None,
    filter: str | None = None,
    max_executions: int | None = None,
) -> AnalysisToolset:
    """The four analysis tools for any pydantic-ai agent (see module docs)."""
    if session is not None:
        return AnalysisToolset(session, max_executions=max_executions)
    settings = config or load_settings()
    if db_path is not None:
        settings = with_db(settings, db_path)
    return AnalysisToolset(settings=settings, document_filter=filter, max_executions=max_executions)
