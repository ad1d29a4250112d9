"""Every tool's arguments, fuzzed (hypothesis) through a real in-memory client: every call is answered.

Hypothesis runs in a worker thread and sends each example to the test's event loop
(``anyio.from_thread``), so the server under test is one real server for all examples.
A tool failure carries its message (never only the SDK's "Error executing tool X" crash text),
and the server keeps serving afterwards.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given
from mcp import Client
from mcp.shared.exceptions import MCPError

from mcp_analysis.server.app import create_server
from tests.adversarial.fuzzing import FUZZ, TOOL_ARGS
from tests.conftest import SAMPLE_DOCUMENTS, make_settings
from tests.mcp_helpers import text

pytestmark = pytest.mark.anyio


@pytest.fixture
async def client(sample_db: Path, tmp_path: Path) -> AsyncIterator[Client]:
    config = make_settings(sample_db, sessions={"dir": tmp_path / "s"}, sandbox={"code_timeout": 3.0})
    async with Client(create_server(config=config)) as connected:
        yield connected


async def _assert_answered(client: Client, name: str, arguments: dict[str, Any]) -> None:
    with anyio.fail_after(60):
        try:
            result = await client.call_tool(name, arguments)
        except MCPError as exc:  # a protocol error is an answer too, if it says what is wrong
            assert exc.error.code == -32602 and "not valid Unicode" in exc.error.message, (name, arguments, exc)
            return
    if result.is_error:
        message = text(result)
        assert message.strip() and message.strip() != f"Error executing tool {name}", (name, arguments, message)
    else:
        assert result.structured_content is not None, (name, arguments)


@pytest.mark.parametrize("name", sorted(TOOL_ARGS))
async def test_fuzz_tool_arguments(client: Client, name: str) -> None:
    @FUZZ
    @given(arguments=TOOL_ARGS[name])
    def one(arguments: dict[str, Any]) -> None:
        anyio.from_thread.run(_assert_answered, client, name, arguments)

    await anyio.to_thread.run_sync(one)  # hypothesis drives from a thread; each example runs on this loop
    alive = await client.call_tool("list_documents", {})
    assert alive.structured_content["total"] == SAMPLE_DOCUMENTS


async def test_ten_megabytes_of_code(client: Client) -> None:
    for code in ("x = 1\n" + "#" * 10_000_000 + "\nx + 1", "'" + "y" * 10_000_000 + "'", "\x00" * 10_000_000):
        await _assert_answered(client, "execute_code", {"code": code})
    assert (await client.call_tool("execute_code", {"code": "41 + 1"})).structured_content["value"] == "42"
