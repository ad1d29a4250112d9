"""The server's parts stand alone: a tool is a plain function, registered or called on its own.

Tools reach the runtime through the lifespan of the server they are registered on, so one
tool can be registered on a bare `AnalysisServer`, called from Python inside a real
request, and a server whose lifespan yields no runtime gets a clear error, not a crash.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.server import MCPServer
from mcp.server.mcpserver import Context

from mcp_analysis.server import tools, uris
from mcp_analysis.server.app import AnalysisServer, create_server
from mcp_analysis.server.runtime import Runtime
from mcp_analysis.server.tools import TOOLS, register_tools
from mcp_analysis.session.scope import current_scope
from tests.conftest import make_settings
from tests.mcp_helpers import text

pytestmark = pytest.mark.anyio


def settings_for(sample_db: Path, tmp_path: Path) -> Any:
    return make_settings(sample_db, sessions={"dir": tmp_path / "sessions"})


async def test_one_tool_registered_alone_on_a_bare_analysis_server(sample_db: Path, tmp_path: Path) -> None:
    from mcp.server.subscriptions import InMemorySubscriptionBus

    server = AnalysisServer(Runtime(settings_for(sample_db, tmp_path), InMemorySubscriptionBus()))
    register_tools(server, [spec for spec in TOOLS if spec.fn is tools.search])
    async with Client(server) as client:
        assert [t.name for t in (await client.list_tools()).tools] == ["search"]
        found = await client.call_tool("search", {"query": "phishing", "limit": 2})
        assert not found.is_error, text(found)
        assert len(found.structured_content["results"]) == 2
        failed = await client.call_tool("search", {"query": "  "})  # the error contract holds alone too
        assert failed.is_error and "search needs a non-empty query" in text(failed)


async def test_a_tool_function_called_from_python_inside_a_request(sample_db: Path, tmp_path: Path) -> None:
    """The function is the tool: called directly with a request's context, it answers as the tool does."""
    server = create_server(config=settings_for(sample_db, tmp_path))

    @server.tool()
    async def probe(ctx: Context) -> dict[str, Any]:
        listed = await tools.list_documents(ctx, offset=0, limit=2)
        state = await tools.analysis_state(ctx)
        return {"listed": listed.structured_content, "state": state.structured_content}

    async with Client(server) as client:
        through_wire = (await client.call_tool("list_documents", {"limit": 2})).structured_content
        direct = (await client.call_tool("probe", {})).structured_content
    assert direct["listed"] == through_wire  # same caller (stdio-like: one client), same session, same page
    assert direct["state"]["session"] == through_wire["session"]
    assert direct["state"]["resource"] == uris.session_state(through_wire["session"])


async def test_a_tool_on_a_server_without_a_runtime_says_so() -> None:
    server = MCPServer("foreign")
    register_tools(server, [spec for spec in TOOLS if spec.fn is tools.analysis_state])
    async with Client(server) as client:
        result = await client.call_tool("analysis_state", {})
    assert result.is_error and "no mcp-analysis runtime" in text(result)


async def test_tool_calls_and_resource_reads_run_in_a_call_scope_other_requests_do_not(
    sample_db: Path, tmp_path: Path
) -> None:
    """The server layer decides which MCP methods are a session call (session/ knows no method names)."""
    server = create_server(config=settings_for(sample_db, tmp_path))
    seen: dict[str, bool] = {}

    @server.tool()
    async def scoped() -> str:
        seen["tools/call"] = current_scope() is not None
        return "ok"

    @server.resource("probe://scope/{name}")
    async def scoped_read(name: str) -> str:
        seen["resources/read"] = current_scope() is not None
        return name

    @server.prompt()
    def unscoped() -> str:
        seen["prompts/get"] = current_scope() is not None
        return "ok"

    async with Client(server) as client:
        await client.call_tool("scoped", {})
        await client.read_resource("probe://scope/x")
        await client.get_prompt("unscoped", {})
    assert seen == {"tools/call": True, "resources/read": True, "prompts/get": False}
    assert current_scope() is None  # and none is left behind


async def test_the_registered_templates_are_the_ones_uris_builds(sample_db: Path, tmp_path: Path) -> None:
    async with Client(create_server(config=settings_for(sample_db, tmp_path))) as client:
        templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
        listed = (await client.list_resources()).resources
        first = listed[0]
        document_id = first.name.split("/")[0]
        read = await client.read_resource(uris.document_file(document_id, "metadata.json"))
    assert templates == {uris.document_file_template(n) for n in uris.DOCUMENT_FILES} | {
        uris.DOCUMENT_TABLE_CSV,
        uris.SESSION_STATE,
        uris.SESSION_EXECUTION,
    } | {uris.session_chart_template(e) for e in uris.SESSION_CHART_FILES}
    assert first.uri == uris.document_file(document_id, first.name.split("/")[1])
    assert f'"id": "{document_id}"' in read.contents[0].text
