"""The Python API as docs/python-api.md shows it: the page's example runs as written, and every entry
point reads `db_path` as `--db` does."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import docs_block


@pytest.mark.anyio
async def test_the_python_api_snippet_runs_as_written(
    sample_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/python-api.md, verbatim: top-level await as in `python -m asyncio` or a notebook. The
    agent part needs a model service, so it is left out; constructing an Agent needs only a key."""
    (tmp_path / "kb.lancedb").symlink_to(sample_db)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-used-nothing-is-sent")
    block = docs_block("python-api.md")
    no_mcp, rest = block.split("# Questions answered by the built-in agent:")
    mcp_server = rest[rest.index("# The MCP server") :]
    namespace: dict[str, Any] = {}
    for part in (no_mcp, mcp_server):
        code = compile(part, "docs/python-api.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        pending = eval(code, namespace)  # the page's own example
        if pending is not None:
            await pending
    result, session = namespace["result"], namespace["session"]
    assert result.success, result.error
    assert result.value == "6"  # the sample's documents whose uri has 'report' in it
    assert [e.success for e in session.state.executions] == [True]
    assert session.state.citations == [namespace["hits"][0].chunk_id]
    assert type(namespace["server"]).__name__ == "AnalysisServer"
    assert namespace["agent"].toolsets


def test_api_entry_points_keep_uris_and_expand_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`db_path` of AnalysisClient / create_toolset / create_server as `--db` reads it."""
    from mcp_analysis import AnalysisClient, create_server, create_toolset

    monkeypatch.setenv("HOME", str(tmp_path))
    for given, expected in (("s3://bucket/kb", "s3://bucket/kb"), ("~/kb.lancedb", tmp_path / "kb.lancedb")):
        assert AnalysisClient(given).settings.db == expected
        assert create_toolset(db_path=given)._settings.db == expected  # opened on first use
        assert create_server(db_path=given).runtime.settings.db == expected
