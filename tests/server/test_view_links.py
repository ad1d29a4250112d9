"""Who is pointed at the MCP App view: hosts that declare the extension, and no one else."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.extension import advertise

from mcp_analysis.server.app import create_server
from mcp_analysis.ui import VIEW_MIME, VIEW_URI, view_html
from tests.conftest import make_settings
from tests.mcp_helpers import http_server

pytestmark = pytest.mark.anyio

EXTENSION = "io.modelcontextprotocol/ui"
RENDERS_VIEW = advertise(EXTENSION, {"mimeTypes": [VIEW_MIME]})
VIEW_TOOLS = {"search", "execute_code", "cite"}


def wire(model: Any) -> bytes:
    """A result as it travels (JSON, by alias), for a byte-level comparison."""
    return json.dumps(model.model_dump(mode="json", by_alias=True, exclude_none=True), sort_keys=True).encode()


def linked(tools: Any) -> dict[str, Any]:
    return {t.name: (t.meta or {}).get("ui") for t in tools.tools}


async def test_one_server_points_only_the_clients_that_declare_the_extension_at_the_view(
    sample_db: Path, tmp_path: Path
) -> None:
    # One real HTTP server, three clients: the decision is made per client, not for the server.
    with http_server(sample_db, log_dir=tmp_path) as server:
        async with server.client(extensions=[RENDERS_VIEW]) as client:
            with_view = await client.list_tools()
            view = await client.read_resource(VIEW_URI)
        async with server.client() as client:
            without = await client.list_tools()
            unlisted = await client.list_resources()
        # The extension without the view's MIME type is not "renders the view".
        async with server.client(extensions=[advertise(EXTENSION, {"mimeTypes": ["text/html"]})]) as client:
            other_mime = await client.list_tools()

    assert {name for name, ui in linked(with_view).items() if ui} == VIEW_TOOLS
    assert all(ui == {"resourceUri": VIEW_URI} for name, ui in linked(with_view).items() if name in VIEW_TOOLS)
    assert all(t.meta is None for t in without.tools) and all(t.meta is None for t in other_mime.tools)
    assert not [r for r in unlisted.resources if str(r.uri).startswith("ui://")]
    [content] = view.contents
    assert content.uri == VIEW_URI and content.mime_type == VIEW_MIME and content.text == view_html()


async def test_a_host_without_the_extension_sees_tools_and_results_byte_for_byte_as_without_the_view(
    sample_db: Path, tmp_path: Path
) -> None:
    settings = make_settings(sample_db, sessions={"dir": tmp_path / "sessions"})
    seen: dict[bool, list[bytes]] = {}
    for view in (True, False):
        async with Client(create_server(config=settings, view=view)) as client:
            tools = await client.list_tools()
            listed = await client.list_resources()
            found = await client.call_tool("search", {"query": "total revenue", "limit": 3})
            cited = await client.call_tool("cite", {"chunk_ids": [found.structured_content["results"][0]["chunk_id"]]})
            session = found.structured_content["session"]
            seen[view] = [wire(tools), wire(listed)] + [
                wire(r).replace(session.encode(), b"SESSION") for r in (found, cited)
            ]
    assert seen[True] == seen[False]
    assert b"resourceUri" not in seen[True][0] and b"ui://" not in seen[True][1] and b"passage" not in seen[True][3]


async def test_a_host_that_renders_the_view_gets_citations_it_can_open(sample_db: Path, tmp_path: Path) -> None:
    settings = make_settings(sample_db, sessions={"dir": tmp_path / "sessions"})
    async with Client(create_server(config=settings), extensions=[RENDERS_VIEW]) as client:
        found = await client.call_tool("search", {"query": "total revenue in the quarter", "limit": 2})
        hit = found.structured_content["results"][0]
        cited = await client.call_tool("cite", {"chunk_ids": [hit["chunk_id"]]})
        state_uri = f"analysis://sessions/{cited.structured_content['session']}/state"
        state = json.loads((await client.read_resource(state_uri)).contents[0].text)
        document = await client.read_resource(f"documents:///{hit['document_id']}/content.txt")
    [citation] = cited.structured_content["citations"]
    assert citation["document_id"] == hit["document_id"]
    whole = state["citation_index"][hit["chunk_id"]]["content"].strip()
    assert citation["passage"] == whole[:600].rstrip() + ("…" if len(whole) > 600 else "")
    # The view finds it word by word (whatever the spacing of a table): so does this test.
    first_words = " ".join(re.findall(r"\w+", citation["passage"])[:12])
    assert len(first_words) > 20 and first_words in " ".join(re.findall(r"\w+", document.contents[0].text))
