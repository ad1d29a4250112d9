"""A new user's first hour: what README tells them to run works as written, errors say what to do.

Each test reproduces a snag met by following README.md from a fresh clone.
"""

from __future__ import annotations

import ast
import os
import socket
from pathlib import Path
from typing import Any

import pytest

from mcp_analysis.config import load_settings
from tests.conftest import REPO
from tests.test_cli import cli

README = (REPO / "README.md").read_text()


def readme_block(section: str, lang: str = "python") -> str:
    """The first fenced `lang` block under the README heading `section`."""
    body = README.split(f"\n{section}\n", 1)[1]
    return body.split(f"```{lang}\n", 1)[1].split("```", 1)[0]


def without(*names: str) -> dict[str, str]:
    """The environment for a CLI run with `names` unset (the cli helper merges os.environ)."""
    return {k: v for k, v in os.environ.items() if k not in names}


# ------------------------------------------------------------------------------ Python API


@pytest.mark.anyio
async def test_the_python_api_snippet_runs_as_written(
    sample_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """README "Python API", verbatim: top-level await as in `python -m asyncio` or a notebook. The
    agent part needs a model service, so it is left out; constructing an Agent needs only a key."""
    (tmp_path / "kb.lancedb").symlink_to(sample_db)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-used-nothing-is-sent")
    block = readme_block("## Python API")
    no_mcp, rest = block.split("# Questions answered by the built-in agent:")
    mcp_server = rest[rest.index("# The MCP server") :]
    namespace: dict[str, Any] = {}
    for part in (no_mcp, mcp_server):
        code = compile(part, "README.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        pending = eval(code, namespace)  # the README's own example
        if pending is not None:
            await pending
    result, session = namespace["result"], namespace["session"]
    assert result.success, result.error
    assert result.value == "6"  # the sample's documents whose uri has 'report' in it
    assert [e.success for e in session.state.executions] == [True]
    assert session.state.citations == [namespace["hits"][0].chunk_id]
    assert type(namespace["server"]).__name__ == "AnalysisServer"
    assert namespace["agent"].toolsets


def test_load_settings_takes_a_config_path_as_text(tmp_path: Path) -> None:
    config = tmp_path / "mine.yaml"
    config.write_text("search: {limit: 7}\n")
    assert load_settings(str(config)).search.limit == 7


def test_the_configuration_sample_loads_as_is(tmp_path: Path) -> None:
    config = tmp_path / "mcp-analysis.yaml"
    config.write_text(readme_block("## Configuration", "yaml"))
    settings = load_settings(config)
    assert settings.db == Path("/srv/kb.lancedb")
    # The sample spells out the defaults: nothing else differs from an empty config.
    defaults = load_settings(None).model_dump(mode="json")
    assert {**settings.model_dump(mode="json"), "db": defaults["db"]} == defaults


def test_api_entry_points_keep_uris_and_expand_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`db_path` of AnalysisClient / create_toolset / create_server as `--db` reads it."""
    from mcp_analysis import AnalysisClient, create_server, create_toolset

    monkeypatch.setenv("HOME", str(tmp_path))
    for given, expected in (("s3://bucket/kb", "s3://bucket/kb"), ("~/kb.lancedb", tmp_path / "kb.lancedb")):
        assert AnalysisClient(given).settings.db == expected
        assert create_toolset(db_path=given)._settings.db == expected  # opened on first use
        assert create_server(db_path=given).runtime.settings.db == expected


# ------------------------------------------------------------------------------ analyze


def test_analyze_without_an_api_key_is_one_actionable_line(sample_db: Path) -> None:
    result = cli("--db", str(sample_db), "analyze", "How many documents?", env=without("ANTHROPIC_API_KEY"))
    assert result.returncode == 1 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    line = lines[0]
    assert line.startswith("error: Cannot use the analysis model 'anthropic:claude-sonnet-4-20250514'")
    assert "Set the `ANTHROPIC_API_KEY` environment variable" in line
    # pydantic-ai's advice for its own API (a provider object, its test model) is not the CLI user's fix,
    # and it pushed the actionable end of the line past the cut.
    assert "AnthropicProvider(" not in line and "Agent('test')" not in line
    assert line.endswith("`[bedrock]`).")


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_an_unreachable_model_says_where_it_looked(sample_db: Path) -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    result = cli("--db", str(sample_db), "analyze", "q", "--model", "ollama:qwen3", env={"OLLAMA_BASE_URL": url})
    assert result.returncode == 1
    line = result.stderr.strip()
    assert len(line.splitlines()) == 1
    assert line.startswith("error: Cannot reach the analysis model 'ollama:qwen3'")
    assert ".." not in line and "analysis.base_url" in line
