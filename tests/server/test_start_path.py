"""What `serve` imports before it answers `tools/list` (the protocol only), and what it loads next."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import anyio
import pytest
from mcp.server.subscriptions import InMemorySubscriptionBus

from mcp_analysis.config import Settings
from mcp_analysis.server.runtime import Runtime
from tests.conftest import REPO

SEARCH_STACK = ("pyarrow", "numpy", "pandas", "lancedb", "onnxruntime", "tokenizers", "pydantic_ai", "pydantic_monty")

PROGRAM = f"""
import json, sys
import mcp_analysis.cli.app, mcp_analysis.server.runner, mcp_analysis.server.app, mcp_analysis.server.stdio
from mcp_analysis.server.auth import load_tokens
from mcp_analysis.store.filters import normalize_filter
normalize_filter("uri LIKE '%report%'")
print(json.dumps(sorted(m for m in {SEARCH_STACK!r} if m in sys.modules)))
"""


def test_serving_starts_without_importing_the_search_stack() -> None:
    # The knowledge base, embedder and sandbox load in the background after the server answers;
    # importing them first would delay `tools/list` by their import time and memory.
    run = subprocess.run([sys.executable, "-c", PROGRAM], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == []


@pytest.mark.anyio
async def test_the_embedder_and_search_indexes_load_in_the_background_once_started(sample_settings: Settings) -> None:
    """The first search should not wait for the embedder: a started server loads it (and runs one search) itself."""
    runtime = Runtime(sample_settings, InMemorySubscriptionBus())
    async with runtime.use():
        await runtime.ready()
        await runtime.warmed.wait()
        assert runtime.warm_up_error is None
        assert runtime.kb is not None and runtime.kb._embedder is not None
        corpus = await runtime.kb.open_corpus(None)
        assert await corpus.search("approval", limit=1), "the warmed-up knowledge base answers searches"


@pytest.mark.anyio
async def test_the_warm_up_search_gives_way_to_a_client_search(
    sample_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client's search begun while the embedder loads does the warm-up's work: no second search beside it."""
    from mcp_analysis.corpus import Corpus, KnowledgeBase

    queries: list[str] = []
    gate, client_waits = anyio.Event(), anyio.Event()
    real_search, real_embedder = Corpus.search, KnowledgeBase.embedder

    async def recording_search(self: Corpus, query: str, limit: int | None = None) -> Any:
        queries.append(query)
        return await real_search(self, query, limit)

    async def gated_embedder(self: KnowledgeBase) -> Any:
        if self.searched:
            client_waits.set()  # the client's search wants the embedder too
        await gate.wait()  # the embedder "loads" until the client's search has begun
        return await real_embedder(self)

    monkeypatch.setattr(Corpus, "search", recording_search)
    monkeypatch.setattr(KnowledgeBase, "embedder", gated_embedder)
    runtime = Runtime(sample_settings, InMemorySubscriptionBus())
    async with runtime.use():
        await runtime.ready()
        assert runtime.kb is not None and not runtime.warmed.is_set()
        corpus = await runtime.kb.open_corpus(None)
        hits: list[Any] = []
        async with anyio.create_task_group() as tg:

            async def client_search() -> None:
                hits.extend(await corpus.search("approval", limit=1))

            tg.start_soon(client_search)
            await client_waits.wait()
            gate.set()
        await runtime.warmed.wait()
    assert hits, "the client's search is answered"
    assert runtime.warm_up_error is None
    assert queries == ["approval"]


@pytest.mark.anyio
async def test_the_warm_up_searches_once_when_no_client_has(
    sample_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcp_analysis.corpus import Corpus

    queries: list[str] = []
    real_search = Corpus.search

    async def recording_search(self: Corpus, query: str, limit: int | None = None) -> Any:
        queries.append(query)
        return await real_search(self, query, limit)

    monkeypatch.setattr(Corpus, "search", recording_search)
    runtime = Runtime(sample_settings, InMemorySubscriptionBus())
    async with runtime.use():
        await runtime.ready()
        await runtime.warmed.wait()
        assert runtime.kb is not None and runtime.kb.searched
    assert len(queries) == 1
