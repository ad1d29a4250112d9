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
from mcp_analysis.prompts import EXECUTE_CODE_DOC, INSTRUCTIONS
from mcp_analysis.search.models import SearchHit
from mcp_analysis.server.outputs import DocumentInfo
from mcp_analysis.session.analysis import AnalysisSession


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
        super().__init__(instructions=INSTRUCTIONS, max_retries=3)
        self.session = session
        self._settings = settings
        self._filter = document_filter
        self._owned: tuple[Any, AnalysisSession] | None = None
        self._entered = 0
        self.reset_per_run = reset_per_run
        base = settings or (session.kb.settings if session else None)
        self.max_executions = max_executions or (base.analysis.max_executions if base else 15)
        self.add_function(self.search, name="search")
        self.add_function(self.list_documents, name="list_documents")
        self.add_function(self.execute_code, name="execute_code", description=EXECUTE_CODE_DOC)
        self.add_function(self.cite, name="cite")

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

    async def search(self, query: str, limit: int = 5, context: int | None = None) -> list[dict[str, Any]]:
        """Hybrid search (semantic + keyword). Each hit: chunk_id (to cite), document, section, pages and
        the passage around the match.

        Args:
            query: What to look for.
            limit: Number of hits (1-50).
            context: Characters of each hit's passage to show (default 900; more shows more of its section).
        """
        session = self._session()
        try:
            results = await session.search(query, limit)
        except AnalysisError as exc:
            raise ModelRetry(str(exc)) from None
        chars = context or session.kb.settings.search.context_chars
        return [SearchHit.of(r, query, chars).model_dump() for r in results]

    async def list_documents(self) -> list[dict[str, Any]]:
        """List the documents you can see: id, title, uri (and your metadata)."""
        return [DocumentInfo.of(d).model_dump(exclude_defaults=True) for d in await self._session().list_documents()]

    async def execute_code(self, code: str) -> dict[str, Any]:
        """Run Python in the persistent sandbox (see the tool description)."""
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
        return out

    async def cite(self, chunk_ids: list[str]) -> dict[str, Any]:
        """Register the chunk_ids that support your answer (cite([]) if the answer is not from the documents).

        Args:
            chunk_ids: chunk_id values from search results or items.jsonl.
        """
        try:
            outcome = await self._session().cite(chunk_ids)
        except AnalysisError as exc:
            raise ModelRetry(str(exc)) from None
        if outcome.no_evidence:
            return {"cited": [], "note": "recorded: no knowledge-base evidence"}
        return {
            "cited": [{"chunk_id": c.chunk_id, "document_title": c.document_title} for c in outcome.citations],
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
