"""A watched folder's changes reach the host's log pane, naming the files (and nothing they say)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp_types import LoggingMessageNotificationParams

from tests.conftest import run_cli
from tests.mcp_helpers import http_server, stdio_params
from tests.watch.polling import DEADLINE

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(600)]

#: Files here are written whole: a short settle time and debounce apply each change soon.
PROMPT = {"MCP_ANALYSIS_WATCH__SETTLE_SECONDS": "0.2", "MCP_ANALYSIS_WATCH__DEBOUNCE_SECONDS": "0.1"}

SECRET_WORD = "okapi-7731"  # in a file's text: must never reach the log pane


def kb_of(folder: Path, tmp_path: Path, env: dict[str, str]) -> Path:
    folder.mkdir()
    (folder / "first.md").write_text("# First\n\nAbout pangolins.\n")
    kb = tmp_path / "kb.lancedb"
    assert run_cli("--db", str(kb), "sync", str(folder), env=env).returncode == 0
    return kb


async def heard(messages: list[LoggingMessageNotificationParams], words: tuple[str, ...]) -> str:
    with anyio.fail_after(DEADLINE):
        while True:
            for message in messages:
                if all(w in str(message.data) for w in words):
                    return str(message.data)
            await anyio.sleep(0.2)


async def follow_changes(client: Client, folder: Path, messages: list[LoggingMessageNotificationParams]) -> None:
    await client.call_tool("list_documents", {})  # the runtime runs (and the watcher mirrored at start)
    (folder / "second.md").write_text(f"# Second\n\nThe {SECRET_WORD} report.\n")
    added = await heard(messages, ("Watched folder: added", "second.md"))
    assert added == "Watched folder: added second.md"
    (folder / "first.md").write_text("# First\n\nNow about tapirs.\n")
    await heard(messages, ("Watched folder: changed", "first.md"))
    (folder / "second.md").unlink()
    await heard(messages, ("Watched folder: removed", "second.md"))
    assert all(message.level == "info" and message.logger == "mcp-analysis" for message in messages)
    assert not [m for m in messages if SECRET_WORD in str(m.data) or "tapirs" in str(m.data)]


@asynccontextmanager
async def watching_over_stdio(
    folder: Path, tmp_path: Path, env: dict[str, str], messages: list[LoggingMessageNotificationParams]
) -> AsyncIterator[Client]:
    """A legacy stdio client of `serve --watch folder` whose log pane collects into `messages`."""
    kb = kb_of(folder, tmp_path, env)

    async def pane(params: LoggingMessageNotificationParams) -> None:
        messages.append(params)

    async with Client(
        stdio_params(kb, "--watch", str(folder), env=env), mode="legacy", logging_callback=pane
    ) as client:
        yield client


async def test_a_watched_folders_changes_reach_a_stdio_hosts_log(tmp_path: Path) -> None:
    env = {"XDG_DATA_HOME": str(tmp_path / "data"), **PROMPT}
    folder = tmp_path / "folder"
    messages: list[LoggingMessageNotificationParams] = []
    async with watching_over_stdio(folder, tmp_path, env, messages) as client:
        await follow_changes(client, folder, messages)


async def test_a_watched_folders_changes_reach_a_legacy_http_hosts_log(tmp_path: Path) -> None:
    env = {"XDG_DATA_HOME": str(tmp_path / "data"), **PROMPT}
    folder = tmp_path / "folder"
    kb = kb_of(folder, tmp_path, env)
    messages: list[LoggingMessageNotificationParams] = []

    async def pane(params: LoggingMessageNotificationParams) -> None:
        messages.append(params)

    with http_server(kb, "--watch", str(folder), env=env, log_dir=tmp_path) as server:
        async with server.client(mode="legacy", logging_callback=pane) as client:
            await follow_changes(client, folder, messages)


async def test_a_host_whose_callers_may_have_filters_hears_counts_not_names(tmp_path: Path) -> None:
    """With a document filter in force, a watched file may lie outside it: the pane hears how many
    files changed, never their names."""
    env = {
        "XDG_DATA_HOME": str(tmp_path / "data"),
        **PROMPT,
        "MCP_ANALYSIS_SERVER__FILTER": "uri LIKE '%first%'",
    }
    folder = tmp_path / "folder"
    messages: list[LoggingMessageNotificationParams] = []
    async with watching_over_stdio(folder, tmp_path, env, messages) as client:
        await client.call_tool("list_documents", {})
        (folder / "layoffs-q1.md").write_text("# Layoffs\n\nNames.\n")
        assert await heard(messages, ("Watched folder: added",)) == "Watched folder: added 1 file"
    assert not [m for m in messages if "layoffs" in str(m.data)]
