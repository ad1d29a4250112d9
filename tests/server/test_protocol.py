"""The protocol as hosts read it: exact error codes, the logging capability, the view's advertisement.

Every test talks to a real server process (stdio or `serve --http`) through the SDK's own client.
"""

from __future__ import annotations

import shutil
import subprocess
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.extension import advertise
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, LoggingMessageNotificationParams

from mcp_analysis.ui import VIEW_MIME
from tests.conftest import REPO
from tests.mcp_helpers import HttpServer, http_server, stdio_params, text

pytestmark = pytest.mark.anyio

EXTENSION = "io.modelcontextprotocol/ui"
TEMPLATE = "documents:///{document_id}/content.txt"


@pytest.fixture(scope="module")
def http(sample_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    with http_server(sample_db, log_dir=tmp_path_factory.mktemp("logs")) as server:
        yield server


class Pane:
    """A host's log pane: the `notifications/message` a client received."""

    def __init__(self) -> None:
        self.messages: list[LoggingMessageNotificationParams] = []

    async def __call__(self, params: LoggingMessageNotificationParams) -> None:
        self.messages.append(params)

    async def wait_for(self, level: str, nth: int = 1) -> LoggingMessageNotificationParams:
        """The `nth` message at `level` (a notification may trail the result that caused it)."""
        with anyio.fail_after(30):
            while True:
                at_level = [message for message in self.messages if message.level == level]
                if len(at_level) >= nth:
                    return at_level[nth - 1]
                await anyio.sleep(0.05)


async def set_level(client: Client, level: Any) -> None:
    with warnings.catch_warnings():  # deprecated at 2026-07-28, the handshake's own request before
        warnings.simplefilter("ignore")
        await client.set_logging_level(level)


async def refused(call: Any) -> MCPError:
    with pytest.raises(MCPError) as caught:
        await call
    return caught.value


# ----------------------------------------------------------------------------- exact errors


async def assert_unknown_names_are_invalid_params(client: Client) -> None:
    tool = await refused(client.call_tool("no_such_tool", {}))
    assert tool.error.code == INVALID_PARAMS and "Unknown tool: 'no_such_tool'" in tool.error.message
    assert "execute_code" in tool.error.message  # names what there is
    prompt = await refused(client.get_prompt("no_such_prompt", {}))
    assert prompt.error.code == INVALID_PARAMS and "Unknown prompt: 'no_such_prompt'" in prompt.error.message
    for ref, argument, says in [
        ({"type": "ref/prompt", "name": "no_such_prompt"}, "question", "Unknown prompt"),
        ({"type": "ref/prompt", "name": "analyze"}, "no_such_argument", "has no argument 'no_such_argument'"),
        ({"type": "ref/resource", "uri": "documents:///{nope}/x"}, "nope", "Unknown resource template"),
        ({"type": "ref/resource", "uri": TEMPLATE}, "no_such_argument", "its arguments are: document_id"),
    ]:
        error = await refused(client.complete(ref=ref, argument={"name": argument, "value": ""}))
        assert error.error.code == INVALID_PARAMS and says in error.error.message, (ref, argument)
    # An argument a tool does not take is the tool's failure, for the model to correct: nothing runs (the SDK
    # dropped it, so a `filter` was a search over everything that looked filtered).
    for name, arguments in [("search", {"query": "revenue", "filter": "title = 'x'"}), ("cite", {"ids": []})]:
        result = await client.call_tool(name, arguments)
        assert result.is_error and result.structured_content is None, (name, text(result))
        assert f"{name} has no argument '{next(iter(set(arguments) - {'query'}))}'" in text(result)
    assert "its arguments are: query, limit, context, session" in text(
        await client.call_tool("search", {"query": "revenue", "filter": "x"})
    )
    # What exists still answers.
    assert (await client.call_tool("search", {"query": "revenue", "limit": 1})).structured_content["results"]
    assert (await client.get_prompt("analyze", {"question": "q"})).messages
    listed = await client.complete(
        ref={"type": "ref/resource", "uri": TEMPLATE}, argument={"name": "document_id", "value": ""}
    )
    assert listed.completion.values


async def test_unknown_tools_prompts_and_completion_arguments_are_invalid_params_over_stdio(sample_db: Path) -> None:
    for mode in ("legacy", "auto"):
        async with Client(stdio_params(sample_db), mode=mode) as client:
            await assert_unknown_names_are_invalid_params(client)


async def test_unknown_names_are_invalid_params_over_http(http: HttpServer) -> None:
    for mode in ("legacy", "auto"):
        async with http.client(mode=mode) as client:
            await assert_unknown_names_are_invalid_params(client)


# ----------------------------------------------------------------------------- logging


async def assert_failed_calls_are_logged_at_the_clients_level(client: Client, pane: Pane, legacy: bool) -> None:
    assert client.server_capabilities is not None and client.server_capabilities.logging is not None
    if legacy:
        await set_level(client, "error")  # warnings are below what this client asked for
        quiet = await client.call_tool("cite", {"chunk_ids": "not-a-list"})
        assert quiet.is_error
        await set_level(client, "warning")
    result = await client.call_tool("cite", {"chunk_ids": "not-a-list"})
    assert result.is_error
    # The shape expected, not only pydantic's complaint.
    assert 'chunk_ids takes a JSON array of chunk ids, e.g. ["' in text(result)
    warning = await pane.wait_for("warning")
    assert warning.logger == "mcp-analysis"
    assert warning.data == f"Tool 'cite' failed: {text(result)}"
    assert [m.level for m in pane.messages].count("warning") == 1  # the call made under "error" was not told
    refused = await client.call_tool("search", {"query": "q", "filter": "x"})  # refused before the SDK's handler
    assert refused.is_error
    assert (await pane.wait_for("warning", nth=2)).data == f"Tool 'search' failed: {text(refused)}"


async def test_a_failed_call_is_a_warning_in_the_hosts_log_over_stdio(sample_db: Path) -> None:
    pane = Pane()
    async with Client(stdio_params(sample_db), mode="legacy", logging_callback=pane) as client:
        await assert_failed_calls_are_logged_at_the_clients_level(client, pane, legacy=True)
    # 2026-07-28: the request opts in with its `_meta` log level; the SDK client sets it for every request.
    modern = Pane()
    async with Client(stdio_params(sample_db), logging_callback=modern, log_level="warning") as client:
        await assert_failed_calls_are_logged_at_the_clients_level(client, modern, legacy=False)


async def test_a_failed_call_is_a_warning_in_the_hosts_log_over_http(http: HttpServer) -> None:
    pane = Pane()
    async with http.client(mode="legacy", logging_callback=pane) as client:
        await assert_failed_calls_are_logged_at_the_clients_level(client, pane, legacy=True)
    modern = Pane()
    async with http.client(logging_callback=modern, log_level="warning") as client:
        await assert_failed_calls_are_logged_at_the_clients_level(client, modern, legacy=False)


async def test_two_legacy_clients_keep_their_own_levels(http: HttpServer) -> None:
    loud, quiet = Pane(), Pane()
    async with (
        http.client(mode="legacy", logging_callback=loud) as first,
        http.client(mode="legacy", logging_callback=quiet) as second,
    ):
        await set_level(first, "debug")
        await set_level(second, "critical")
        for client in (first, second):
            assert (await client.call_tool("cite", {"chunk_ids": "x"})).is_error
        await loud.wait_for("warning")
    assert not quiet.messages


async def test_a_client_is_sent_at_most_host_log_per_minute_messages(sample_db: Path) -> None:
    pane = Pane()
    params = stdio_params(sample_db, env={"MCP_ANALYSIS_SERVER__HOST_LOG_PER_MINUTE": "2"})
    async with Client(params, mode="legacy", logging_callback=pane) as client:
        for _ in range(5):
            assert (await client.call_tool("cite", {"chunk_ids": "x"})).is_error
    # A call's messages precede its result on the one stdio stream: all that was sent has arrived.
    assert [m.level for m in pane.messages] == ["warning", "warning"]


# ----------------------------------------------------------------------------- the view's extension


async def test_the_view_extension_is_advertised_only_to_hosts_that_declare_it(http: HttpServer) -> None:
    renders = advertise(EXTENSION, {"mimeTypes": [VIEW_MIME]})
    for mode in ("legacy", "auto"):
        async with http.client(mode=mode, extensions=[renders]) as client:
            assert client.server_capabilities is not None
            assert EXTENSION in (client.server_capabilities.extensions or {}), mode
        async with http.client(mode=mode) as client:
            assert client.server_capabilities is not None
            assert EXTENSION not in (client.server_capabilities.extensions or {}), mode


# ----------------------------------------------------------------------------- the first hour


async def test_a_host_started_before_its_knowledge_base_exists_hears_how_to_create_it(tmp_path: Path) -> None:
    missing = tmp_path / "not-yet.lancedb"
    async with Client(stdio_params(missing)) as client:
        assert {t.name for t in (await client.list_tools()).tools} >= {"search", "execute_code"}
        result = await client.call_tool("list_documents", {})
        assert result.is_error
        assert f"No knowledge base at {missing}" in text(result)
        assert f"`mcp-analysis --db {missing} add PATH`" in " ".join(text(result).split())  # as the CLI takes it
    assert not missing.exists()  # nothing was created on the user's behalf


def uv_command() -> list[str] | None:
    """uv as CI runs it: its own command, or the module of a Python that has it."""
    if shutil.which("uv"):
        return ["uv"]
    for python in ("python3", "python"):
        found = shutil.which(python)
        if found and subprocess.run([found, "-m", "uv", "--version"], capture_output=True).returncode == 0:
            return [found, "-m", "uv"]
    return None


def test_serving_installs_no_dev_tools() -> None:
    """`uv run mcp-analysis ...` / `uv sync` (a host's install) take the runtime dependencies only."""
    uv = uv_command()
    if uv is None:
        pytest.skip("uv is not installed (.ci/run installs it)")
    exported = subprocess.run(
        [*uv, "export", "--frozen", "--no-hashes", "--no-emit-project", "--no-annotate"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert exported.returncode == 0, exported.stderr
    installed = {line.split("==")[0].lower() for line in exported.stdout.splitlines() if "==" in line}
    assert "mcp" in installed and "lancedb" in installed
    assert not installed & {"pytest", "ruff", "moto", "playwright", "hypothesis", "pytest-xdist"}


async def test_a_restarted_worker_is_told_to_the_host(sample_db: Path, tmp_path: Path) -> None:
    import os
    import signal

    import psutil

    pane = Pane()
    db = tmp_path / "kb.lancedb"
    shutil.copytree(sample_db, db)  # its path names this test's server among the machine's processes
    async with Client(stdio_params(db), mode="legacy", logging_callback=pane) as client:
        kept = await client.call_tool("execute_code", {"code": "kept = 41"})
        assert not kept.is_error
        [server] = [p for p in psutil.process_iter(["cmdline"]) if str(db) in " ".join(p.info["cmdline"] or ())]
        workers = [c for c in server.children(recursive=True) if "monty" in c.name()]
        assert workers
        for worker in workers:
            os.kill(worker.pid, signal.SIGKILL)  # as the OOM killer would, while the session is idle
        again = await client.call_tool("execute_code", {"code": "kept + 1"})
        assert again.structured_content["value"] == "42"  # restored on a fresh worker
        told = await pane.wait_for("warning")
    assert "interpreter worker died while idle; restarted" in str(told.data)
