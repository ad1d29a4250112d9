"""`analyze` without a usable model: one line on stderr that names the setting and what to do."""

from __future__ import annotations

import socket
from pathlib import Path

from tests.conftest import run_cli

cli = run_cli


def test_analyze_without_an_api_key_is_one_actionable_line(sample_db: Path) -> None:
    result = cli("--db", str(sample_db), "analyze", "How many documents?", unset=["ANTHROPIC_API_KEY"])
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
