"""Functions the sandboxed code can call: ``await search(...)``, ``await list_documents()``, ``await chart(spec)``.

They return plain dicts and lists (monty rejects pydantic models), validate their
arguments with messages written for the model, bound what they return by the
session's limits (sandbox/bounds.py), and report every search to the session so
its chunk ids can be cited later. Work proportional to the corpus size runs in a
worker thread, so a large listing never stalls other clients' calls.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio

from mcp_analysis.corpus import Corpus
from mcp_analysis.errors import AnalysisError
from mcp_analysis.sandbox.bounds import HostBounds
from mcp_analysis.sandbox.charting import ChartDrawer
from mcp_analysis.sandbox.presentation import hit_fields
from mcp_analysis.search.models import SearchResult

SearchRecorder = Callable[[str, list[SearchResult]], None]
OFF_LOOP_ITEMS = 2000  # listings longer than this are serialized in a worker thread


class HostFunctions:
    def __init__(
        self, corpus: Corpus, default_limit: int, on_search: SearchRecorder | None = None, party: str = ""
    ) -> None:
        self.corpus = corpus
        self.default_limit = default_limit
        self.on_search = on_search
        self.max_limit = corpus.kb.settings.search.max_limit
        self.bounds = HostBounds.of(corpus.kb.settings.sandbox)
        self.charts = ChartDrawer(corpus.kb.settings.charts, party)

    async def search(self, query: Any = None, limit: Any = None) -> list[dict[str, Any]]:
        """search(query: str, limit: int = 10) -> list[dict]: hybrid search with context expansion."""
        if not isinstance(query, str) or not query.strip():
            raise TypeError("search(query, limit=10): query must be a non-empty string")
        if limit is None:
            limit = self.default_limit
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise TypeError("search(query, limit=10): limit must be an int")
        if not 1 <= limit <= self.max_limit:
            raise ValueError(f"search(): limit must be between 1 and {self.max_limit}")
        try:
            results = await self.corpus.search(query, limit)
        except AnalysisError as exc:
            raise ValueError(str(exc)) from None
        except Exception as exc:
            raise RuntimeError(f"search() failed on the server: {type(exc).__name__}: {exc}") from None
        if self.on_search is not None:
            self.on_search(query, results)
        return [hit_fields(r, query) for r in results]

    async def list_documents(self, offset: Any = 0, limit: Any = None) -> list[dict[str, Any]]:
        """list_documents(offset=0, limit=None) -> list[dict]: id, title, uri, created_at, metadata."""
        for name, value in (("offset", offset), ("limit", limit)):
            if value is None and name == "limit":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise TypeError(f"list_documents(offset=0, limit=None): {name} must be an int >= 0")
        documents = await self.corpus.documents()
        chosen = documents[offset : None if limit is None else offset + limit]
        if len(chosen) > OFF_LOOP_ITEMS:
            listing = await anyio.to_thread.run_sync(_public, chosen)
        else:
            listing = _public(chosen)
        self.bounds.check_result("list_documents", listing)
        return listing

    def mapping(self, first_chart: int = 1) -> dict[str, Any]:
        """The host functions for one call, whose first chart is number `first_chart`."""
        # The prelude's search()/list_documents() call the _mcp_ names; the plain names serve an
        # interpreter state saved without the prelude (they return the dicts as they are).
        functions = {"search": self.search, "list_documents": self.list_documents}
        self.charts.begin_call(first_chart)  # a mapping is taken for each call: charts drawn from now on are its own
        return functions | {f"_mcp_{name}": fn for name, fn in functions.items()} | self.charts.functions()


def _public(documents: list[Any]) -> list[dict[str, Any]]:
    return [m.public() for m in documents]
