"""Functions the sandboxed code can call: ``await search(...)``, ``await list_documents()``.

They return plain dicts and lists (monty rejects pydantic models), validate their
arguments with messages written for the model, and report every search to the
session so its chunk ids can be cited later.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mcp_analysis.corpus import Corpus
from mcp_analysis.errors import AnalysisError
from mcp_analysis.sandbox.presentation import hit_fields
from mcp_analysis.search.models import SearchResult

SearchRecorder = Callable[[str, list[SearchResult]], None]


class HostFunctions:
    def __init__(self, corpus: Corpus, default_limit: int, on_search: SearchRecorder | None = None) -> None:
        self.corpus = corpus
        self.default_limit = default_limit
        self.on_search = on_search
        self.max_limit = corpus.kb.settings.search.max_limit

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

    async def list_documents(self) -> list[dict[str, Any]]:
        """list_documents() -> list[dict]: id, title, uri, created_at (and metadata) of every document."""
        return [m.public() for m in await self.corpus.documents()]

    def mapping(self) -> dict[str, Any]:
        # The prelude's search()/list_documents() call the _mcp_ names; the plain names serve an
        # interpreter state saved before the prelude existed (they return the dicts as they are).
        functions = {"search": self.search, "list_documents": self.list_documents}
        return functions | {f"_mcp_{name}": fn for name, fn in functions.items()}
