"""Loud failures if the mcp SDK changes under the internals and provisional hooks we rely on.

server/sdk_compat.py reads ``ServerSession._connection`` (no public route in mcp 2.3);
server/middleware.py advertises ``resources.listChanged`` through ``MCPServer.middleware``
(public, marked provisional) and sees ``resources/list`` (server/resources.py serves it).
Each assumption is checked here through a real in-memory client, so an SDK upgrade that breaks one fails this file
with a message naming what moved.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.server import MCPServer
from mcp.server.connection import Connection
from mcp.server.mcpserver import Context

from mcp_analysis.server.app import create_server
from mcp_analysis.server.sdk_compat import connection_of, log_levels_asked, progress_wanted, transport_session_id
from tests.conftest import REPO, SAMPLE_DOCUMENTS, make_settings
from tests.services import free_port, stop, wait_for_port

pytestmark = pytest.mark.anyio


async def test_a_tool_can_reach_its_connection() -> None:
    seen: dict[str, Any] = {}
    server = MCPServer("probe")

    @server.tool()
    async def probe(ctx: Context) -> str:
        connection = connection_of(ctx.session)
        seen["connection"] = connection
        seen["session_id"] = transport_session_id(ctx.session)
        return "ok"

    for mode in ("legacy", "auto"):
        async with Client(server, mode=mode) as client:
            await client.call_tool("probe", {})
        connection = seen["connection"]
        assert isinstance(connection, Connection), (
            "mcp SDK changed: ServerSession no longer keeps its Connection in `_connection`; "
            "update mcp_analysis/server/sdk_compat.py"
        )
        for attribute in ("session_id", "exit_stack", "notify"):
            assert hasattr(connection, attribute), f"mcp SDK changed: Connection has no `{attribute}`"
        assert seen["session_id"] is None  # in-memory: no transport session


async def test_middleware_sees_method_params_and_wire_results(sample_db: Path, tmp_path: Path) -> None:
    observed: list[tuple[str, Any, Any]] = []
    server = create_server(config=make_settings(sample_db, sessions={"dir": tmp_path / "s"}))

    async def spy(ctx: Any, call_next: Any) -> Any:
        result = await call_next(ctx)
        observed.append((ctx.method, ctx.params, result))
        return result

    server.middleware.insert(0, spy)  # outermost of ours: sees what the client will get
    async with Client(server, mode="legacy") as client:
        capabilities = client.server_capabilities
        assert capabilities.resources is not None and capabilities.resources.list_changed is True
        page = await client.list_resources()
        assert len(page.resources) == SAMPLE_DOCUMENTS * 5  # 5 files a document
    methods = {method: (params, result) for method, params, result in observed}
    assert {"initialize", "resources/list"} <= set(methods), "mcp SDK changed: middleware no longer sees these"
    _, init_result = methods["initialize"]
    assert isinstance(init_result, dict) and init_result["capabilities"]["resources"]["listChanged"] is True
    _, listed = methods["resources/list"]
    assert isinstance(listed, dict) and len(listed["resources"]) == SAMPLE_DOCUMENTS * 5, (
        "mcp SDK changed: call_next no longer returns the wire dict of resources/list"
    )


def test_the_low_level_server_is_reachable() -> None:
    from mcp.server.lowlevel.server import Server

    from mcp_analysis.server.sdk_compat import lowlevel_server

    server = MCPServer("probe")
    lowlevel = lowlevel_server(server)
    assert isinstance(lowlevel, Server)
    assert callable(lowlevel.run) and callable(lowlevel.create_initialization_options)


async def test_legacy_sessions_and_their_idle_timeout_are_reachable() -> None:
    """server/legacy_http.py reads the SDK's open legacy sessions and shortens one's idle timeout."""
    import anyio
    import httpx2
    from mcp.server.streamable_http import StreamableHTTPServerTransport

    from mcp_analysis.server.sdk_compat import open_legacy_sessions, set_idle_timeout

    server = MCPServer("probe")
    app = server.streamable_http_app(json_response=True, session_idle_timeout=3600)
    manager = server.session_manager
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "probe", "version": "0"}}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    async with (
        manager.run(),
        httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1:8765") as http,
    ):
        response = await http.post(
            "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}, headers=headers
        )
        session_id = response.headers["mcp-session-id"]
        transport = open_legacy_sessions(manager).get(session_id)
        assert isinstance(transport, StreamableHTTPServerTransport), (
            "mcp SDK changed: StreamableHTTPSessionManager no longer keeps open sessions in `_server_instances`"
        )
        assert set_idle_timeout(transport, 0.5), "mcp SDK changed: the transport has no `_idle_timeout`"
        for _ in range(100):  # the SDK ends it at the shortened timeout (0.5 s), not after an hour
            if session_id not in open_legacy_sessions(manager):
                break
            await anyio.sleep(0.1)
        assert session_id not in open_legacy_sessions(manager)


PROGRESS_PROBE = """
import sys
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp_analysis.server.sdk_compat import progress_wanted

server = MCPServer("probe")

@server.tool()
async def probe(ctx: Context) -> bool:
    return progress_wanted(ctx.request_context)

if sys.argv[1:2] == ["http"]:
    server.run("streamable-http", port=int(sys.argv[2]), stateless_http=True)
else:
    server.run()
"""


async def test_a_tool_knows_whether_its_caller_listens_for_progress(tmp_path: Path) -> None:
    async def listen(progress: float, total: float | None, message: str | None) -> None:
        pass

    server = MCPServer("probe")

    @server.tool()
    async def probe(ctx: Context) -> bool:
        return progress_wanted(ctx.request_context)

    script = tmp_path / "probe.py"
    script.write_text(PROGRESS_PROBE)
    over_stdio = StdioServerParameters(command=sys.executable, args=[str(script)], cwd=str(REPO))
    with probe_over_http(script) as over_http:
        # In-process (direct dispatch), JSON-RPC over a pipe, and 2026-07-28 HTTP (a dispatch per request).
        for target in (server, over_stdio, over_http):
            async with Client(target if not isinstance(target, str) else streamable_http_client(target)) as client:
                asked = await client.call_tool("probe", {}, progress_callback=listen)
                not_asked = await client.call_tool("probe", {})
            assert asked.structured_content == {"result": True}, target
            assert not_asked.structured_content == {"result": False}, (
                f"{target}: mcp SDK changed: progress_wanted cannot tell a caller without a progress token; "
                "update mcp_analysis/server/sdk_compat.py"
            )


@contextlib.contextmanager
def probe_over_http(script: Path) -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen([sys.executable, str(script), "http", str(port)], cwd=REPO)
    try:
        wait_for_port(port, process, 60, "probe server")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop(process, timeout=15)


def test_the_sdks_rule_for_requested_log_levels_is_reachable() -> None:
    # Handshake era: every level (logging/setLevel decides); 2026-07-28: what `_meta` asked, and up.
    assert log_levels_asked("2025-11-25", None) >= {"debug", "warning", "emergency"}
    assert log_levels_asked("2026-07-28", None) == frozenset()
    asked = log_levels_asked("2026-07-28", {"io.modelcontextprotocol/logLevel": "warning"})
    assert "warning" in asked and "error" in asked and "info" not in asked
