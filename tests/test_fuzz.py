"""Property-based fuzzing (hypothesis) of every tool's arguments and of raw JSON-RPC.

Hypothesis runs in a worker thread and sends each example to the test's event loop
(``anyio.from_thread``), so the server under test is one real server for all examples.

Properties: every call is answered; a tool failure carries its message (never only the
SDK's "Error executing tool X" crash text); malformed raw messages get their JSON-RPC
error; the server keeps serving afterwards. Example counts are bounded so the module
stays within its CI budget (about a minute on a busy 2-core machine).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.shared.exceptions import MCPError

from mcp_analysis.server.app import create_server
from mcp_analysis.server.jsonrpc_screen import screen
from tests.conftest import REPO, make_settings
from tests.mcp_helpers import HttpServer, http_server, text
from tests.test_hardening_wire import LEGACY, MODERN_META, StdioWire, _request

pytestmark = pytest.mark.anyio

FUZZ = settings(
    max_examples=int(os.environ.get("MCP_ANALYSIS_FUZZ_EXAMPLES", "30")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# Text with everything a transport may choke on: NUL, lone surrogates, controls, huge runs.
any_char = st.characters(blacklist_categories=())
nasty_text = st.one_of(
    st.text(any_char, max_size=200),
    st.sampled_from(["", " ", "\x00", "\ud800", "a\udfffb", "\u2028", "' OR 1=1 --", "%s%n", "../../etc/passwd"]),
    st.builds(lambda c, n: c * n, st.sampled_from(["x", "\x00", "é", "\ud800"]), st.integers(1, 20_000)),
)
json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True, allow_infinity=True), nasty_text
)
any_value = st.recursive(
    json_scalars, lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner, max_size=5)
)
maybe = st.one_of(any_value, nasty_text)  # a well-typed-ish or a wrong-typed argument

TOOL_ARGS = {
    "search": st.fixed_dictionaries({"query": maybe}, optional={"limit": any_value, "session": any_value}),
    "list_documents": st.fixed_dictionaries({}, optional={"offset": any_value, "limit": any_value, "session": maybe}),
    "execute_code": st.fixed_dictionaries({"code": maybe}, optional={"session": any_value}),
    "cite": st.fixed_dictionaries(
        {"chunk_ids": st.one_of(st.lists(nasty_text, max_size=20), any_value)}, optional={"session": any_value}
    ),
    "new_analysis": st.fixed_dictionaries({}, optional={"session": any_value, "extra": any_value}),
    "analysis_state": st.fixed_dictionaries({}, optional={"session": any_value}),
}


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
    assert alive.structured_content["total"] == 12


async def test_ten_megabytes_of_code(client: Client) -> None:
    for code in ("x = 1\n" + "#" * 10_000_000 + "\nx + 1", "'" + "y" * 10_000_000 + "'", "\x00" * 10_000_000):
        await _assert_answered(client, "execute_code", {"code": code})
    assert (await client.call_tool("execute_code", {"code": "41 + 1"})).structured_content["value"] == "42"


# ------------------------------------------------------------------------------ raw JSON-RPC

methods = st.sampled_from(
    ["tools/call", "tools/list", "resources/list", "resources/read", "prompts/get", "ping", "initialize", "nope/x", ""]
)
raw_messages = st.one_of(
    st.binary(max_size=300),
    st.builds(lambda v: json.dumps(v).encode(), any_value),
    st.builds(
        lambda i, m, p: json.dumps({"jsonrpc": "2.0", "id": i, "method": m, "params": p}).encode(),
        json_scalars,
        methods,
        any_value,
    ),
    st.builds(
        lambda i, n, a: json.dumps(
            {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": n, "arguments": a}}
        ).encode(),
        st.integers(1000, 2000),
        st.sampled_from(sorted(TOOL_ARGS)),
        any_value,
    ),
)


def _one_line(raw: bytes) -> bytes:
    return raw.replace(b"\n", b" ").replace(b"\r", b" ")


@pytest.fixture
async def stdio(sample_db: Path, tmp_path: Path) -> AsyncIterator[StdioWire]:
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data"), "MCP_ANALYSIS_SANDBOX__CODE_TIMEOUT": "3"}
    command = [sys.executable, "-m", "mcp_analysis", "--db", str(sample_db), "serve"]
    async with await anyio.open_process(command, cwd=REPO, env=env, stderr=None) as process:
        wire = StdioWire(process)
        init = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "0"}}
        await wire.send(_request(1, "initialize", init))
        assert "result" in await wire.receive()
        await wire.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        yield wire
        process.kill()


async def test_fuzz_raw_stdio(stdio: StdioWire) -> None:
    counter = iter(range(10_000_000, 20_000_000))

    async def check(raw: bytes) -> None:
        line = _one_line(raw)
        if not line.strip():
            return
        await stdio.send(line)
        expected = screen(line)
        probe = next(counter)
        await stdio.send(_request(probe, "ping"))
        replies = []
        while True:
            reply = await stdio.receive()
            assert reply.get("jsonrpc") == "2.0", reply
            replies.append(reply)
            if reply.get("id") == probe:
                break
        if expected is not None:
            assert replies[0] == json.loads(expected), (line[:200], replies[0])

    @FUZZ
    @given(raw=raw_messages)
    def one(raw: bytes) -> None:
        anyio.from_thread.run(check, raw)

    await anyio.to_thread.run_sync(one)


@pytest.fixture(scope="module")
def http(sample_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    logs = tmp_path_factory.mktemp("fuzz")
    env = {"XDG_DATA_HOME": str(logs / "data"), "MCP_ANALYSIS_SANDBOX__CODE_TIMEOUT": "3"}
    with http_server(sample_db, log_dir=logs, env=env) as server:
        yield server


@pytest.mark.parametrize("era", ["2026-07-28", LEGACY])
def test_fuzz_raw_http(http: HttpServer, era: str) -> None:
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    headers["MCP-Protocol-Version"] = era

    @FUZZ
    @given(raw=raw_messages)
    def one(raw: bytes) -> None:
        response = httpx2.post(http.url, content=raw, headers=headers, timeout=60)
        assert response.status_code < 500, (raw[:200], response.status_code, response.text[:300])
        expected = screen(raw)
        if expected is not None:
            assert response.status_code == 400 and response.json() == json.loads(expected), (raw[:200], response.text)

    one()
    ok = httpx2.post(
        http.url,
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": MODERN_META}},
        headers={**headers, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"},
        timeout=30,
    )
    assert ok.status_code == 200 and len(ok.json()["result"]["tools"]) == 6
