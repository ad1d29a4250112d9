"""What `serve` imports before it answers `tools/list`: the protocol, never the search stack."""

from __future__ import annotations

import json
import subprocess
import sys

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
