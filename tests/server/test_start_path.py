"""What `serve` imports before it answers `tools/list` (the protocol only), and what it loads next."""

from __future__ import annotations

import json
import subprocess
import sys

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
