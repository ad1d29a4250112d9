"""First contact: `serve --sample` on a machine where the sample knowledge base is not built yet.

MCP hosts give a server a connect timeout (the MCP Inspector: 15 s) while the first build of
the sample takes tens of seconds. The server answers the handshake and `tools/list` at once,
builds the sample in the background, and tool calls wait for it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp_types import LoggingMessageNotificationParams

from tests.conftest import REPO, SAMPLE_DOCUMENTS

pytestmark = pytest.mark.anyio

BUILT = f"Sample knowledge base ready: {SAMPLE_DOCUMENTS} documents"


async def test_the_readme_first_command_answers_tools_list_before_the_sample_is_built(tmp_path: Path) -> None:
    data = tmp_path / "data"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcp_analysis", "serve", "--sample"],
        env={**os.environ, "XDG_DATA_HOME": str(data)},
        cwd=str(REPO),
    )
    stderr = tmp_path / "stderr.txt"
    pane: list[str] = []  # the host's log pane (a handshake-era host, as Claude Desktop is)

    async def heard(message: LoggingMessageNotificationParams) -> None:
        pane.append(str(message.data))

    with stderr.open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode="legacy", logging_callback=heard) as client:
            tools = await client.list_tools()
            said_when_listed = stderr.read_text()
            found = await client.call_tool("search", {"query": "average quarterly revenue", "limit": 3})
            said_when_found = stderr.read_text()
    assert {"search", "execute_code", "list_documents", "cite"} <= {t.name for t in tools.tools}
    # The order of events: tools/list returned, then the build finished, then search answered.
    assert BUILT not in said_when_listed, said_when_listed
    assert BUILT in said_when_found, said_when_found
    assert not found.is_error, found
    titles = [hit["document_title"] for hit in found.structured_content["results"]]
    assert any("Quarterly Financial Report" in title for title in titles), titles
    assert (data / "mcp-analysis" / "sample.lancedb").is_dir()
    # The host's log pane was told too, step by step: the build's lines, as on stderr.
    assert any(line.startswith("Building the sample knowledge base") for line in pane), pane
    assert any(BUILT in line for line in pane), pane
