"""Raw JSON-RPC over the real transports: every message is answered, and serving goes on.

stdio: a real `serve` subprocess spoken to in raw bytes. HTTP: raw POSTs to `serve --http`,
both protocol eras. The same malformed messages get the same JSON-RPC errors on both, and
fuzzed messages (hypothesis) get what `jsonrpc_screen.screen` answers for them, never a 5xx.
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
from hypothesis import given

from mcp_analysis.server.jsonrpc_screen import screen
from tests.adversarial.fuzzing import FUZZ, raw_messages
from tests.adversarial.wire import LEGACY, MODERN_META, StdioWire, jsonrpc_request
from tests.conftest import REPO
from tests.mcp_helpers import HttpServer, http_server

pytestmark = pytest.mark.anyio

DEEP = b"[" * 50_000 + b"]" * 50_000

# (name, raw message, expected code, expected id)
BAD: list[tuple[str, bytes, int, Any]] = [
    (
        "lone surrogate",
        b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"search","arguments":{"query":"\\ud800"}}}',
        -32600,
        7,
    ),
    ("params as a list", b'{"jsonrpc":"2.0","id":8,"method":"tools/call","params":[1,2]}', -32602, 8),
    ("missing method", b'{"jsonrpc":"2.0","id":9,"params":{}}', -32600, 9),
    ("not json", b"hello world", -32700, None),
    ("truncated", b'{"jsonrpc":"2.0","id":10,"method":"tools/li', -32700, None),
    ("empty array", b"[]", -32600, None),
    ("batch", b'[{"jsonrpc":"2.0","id":11,"method":"ping"},{"jsonrpc":"2.0","id":12,"method":"ping"}]', -32600, None),
    ("invalid utf-8", b'{"jsonrpc":"2.0","id":14,"method":"ping"\xff}', -32700, None),
    ("object id", b'{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}', -32600, None),
    ("no jsonrpc member", b'{"id":15,"method":"ping"}', -32600, 15),
    ("a bare string", b'"tools/list"', -32600, None),
    # Too deep for any JSON parser's recursion limit: a RecursionError escaping the screen would
    # end the stdio server and answer 500 over HTTP.
    ("deeply nested", b"[" * 100_000 + b"]" * 100_000, -32700, None),
    ("deeply nested params", b'{"jsonrpc":"2.0","id":16,"method":"ping","params":{"a":%s}}' % DEEP, -32700, None),
    # Params no protocol version accepts for the method (eighth hostile round: the SDK said only
    # "Invalid request parameters", data "").
    (
        "unknown log level",
        b'{"jsonrpc":"2.0","id":17,"method":"logging/setLevel","params":{"level":"verbose"}}',
        -32602,
        17,
    ),
    ("tool call without its name", b'{"jsonrpc":"2.0","id":18,"method":"tools/call","params":{}}', -32602, 18),
]
# What those messages must name: the field, and what it takes.
NAMED = {
    "unknown log level": ("logging/setLevel: level:", "'debug'", "'warning'"),
    "tool call without its name": ("tools/call: name: Field required",),
}


def assert_named(name: str, reply: dict[str, Any]) -> None:
    for words in NAMED.get(name, ()):
        assert words in reply["error"]["message"], (name, reply)


@pytest.fixture
async def stdio(sample_db: Path, tmp_path: Path) -> AsyncIterator[StdioWire]:
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data")}
    command = [sys.executable, "-m", "mcp_analysis", "--db", str(sample_db), "serve"]
    async with await anyio.open_process(command, cwd=REPO, env=env, stderr=None) as process:
        wire = StdioWire(process)
        await wire.send(
            jsonrpc_request(
                1,
                "initialize",
                {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
            )
        )
        assert (await wire.receive())["result"]["protocolVersion"] == LEGACY
        await wire.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        yield wire
        assert process.stdin is not None
        await process.stdin.aclose()
        with anyio.fail_after(30):
            await process.wait()


async def test_stdio_answers_every_malformed_line_and_keeps_serving(stdio: StdioWire) -> None:
    for name, raw, code, request_id in BAD:
        await stdio.send(raw)
        reply = await stdio.receive()
        assert reply.get("error", {}).get("code") == code, (name, reply)
        assert reply["id"] == request_id, (name, reply)
        assert "result" not in reply
        assert_named(name, reply)
    await stdio.send(jsonrpc_request(2, "tools/list"))
    listed = await stdio.receive()
    assert listed["id"] == 2 and len(listed["result"]["tools"]) == 6
    await stdio.send(jsonrpc_request(3, "tools/call", {"name": "search", "arguments": {"query": "a\u0000b \u2028 c"}}))
    called = await stdio.receive()
    assert called["id"] == 3 and "result" in called


async def test_stdio_a_huge_line_is_answered(stdio: StdioWire) -> None:
    code = "x = 1\n" + "# " + "y" * (10 * 1024 * 1024) + "\nx + 1"
    await stdio.send(jsonrpc_request(4, "tools/call", {"name": "execute_code", "arguments": {"code": code}}))
    reply = await stdio.receive()
    assert reply["id"] == 4
    assert reply["result"]["isError"] is True or reply["result"]["structuredContent"]["value"] == "2"
    await stdio.send(jsonrpc_request(5, "ping"))
    assert (await stdio.receive())["id"] == 5


@pytest.fixture(scope="module")
def http(sample_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    logs = tmp_path_factory.mktemp("wire")
    with http_server(sample_db, log_dir=logs, env={"XDG_DATA_HOME": str(logs / "data")}) as server:
        yield server


@pytest.mark.parametrize("era", ["2026-07-28", LEGACY])
def test_http_answers_the_same_errors_as_stdio(http: HttpServer, era: str) -> None:
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    headers["MCP-Protocol-Version"] = era
    for name, raw, code, request_id in BAD:
        response = httpx2.post(http.url, content=raw, headers=headers, timeout=30)
        assert response.status_code == 400, (name, response.status_code, response.text)
        reply = response.json()
        assert reply["error"]["code"] == code and reply["id"] == request_id, (name, reply)
        assert "pydantic" not in reply["error"]["message"], (name, reply)
        assert_named(name, reply)
    ok = httpx2.post(
        http.url,
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": MODERN_META}},
        headers={**headers, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"},
        timeout=30,
    )
    assert ok.status_code == 200, ok.text


def _one_line(raw: bytes) -> bytes:
    return raw.replace(b"\n", b" ").replace(b"\r", b" ")


@pytest.fixture
async def fuzz_stdio(sample_db: Path, tmp_path: Path) -> AsyncIterator[StdioWire]:
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data"), "MCP_ANALYSIS_SANDBOX__CODE_TIMEOUT": "3"}
    command = [sys.executable, "-m", "mcp_analysis", "--db", str(sample_db), "serve"]
    async with await anyio.open_process(command, cwd=REPO, env=env, stderr=None) as process:
        wire = StdioWire(process)
        init = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "0"}}
        await wire.send(jsonrpc_request(1, "initialize", init))
        assert "result" in await wire.receive()
        await wire.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        yield wire
        process.kill()


async def test_fuzz_raw_stdio(fuzz_stdio: StdioWire) -> None:
    counter = iter(range(10_000_000, 20_000_000))

    async def check(raw: bytes) -> None:
        line = _one_line(raw)
        if not line.strip():
            return
        await fuzz_stdio.send(line)
        expected = screen(line)
        probe = next(counter)
        await fuzz_stdio.send(jsonrpc_request(probe, "ping"))
        replies = []
        while True:
            reply = await fuzz_stdio.receive()
            assert reply.get("jsonrpc") == "2.0", reply
            replies.append(reply)
            if reply.get("id") == probe:
                break
        if expected is not None:
            # A valid request of an earlier example (a slow list_documents...) may be answered after
            # that example's probe, so its reply can come first here: find this line's answer by id.
            error = json.loads(expected)
            answers = [r for r in replies if "error" in r and r.get("id") == error["id"]]
            assert answers and answers[0] == error, (line[:200], replies)

    @FUZZ
    @given(raw=raw_messages)
    def one(raw: bytes) -> None:
        anyio.from_thread.run(check, raw)

    await anyio.to_thread.run_sync(one)


@pytest.fixture(scope="module")
def fuzz_http(sample_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    logs = tmp_path_factory.mktemp("fuzz")
    env = {"XDG_DATA_HOME": str(logs / "data"), "MCP_ANALYSIS_SANDBOX__CODE_TIMEOUT": "3"}
    with http_server(sample_db, log_dir=logs, env=env) as server:
        yield server


@pytest.mark.parametrize("era", ["2026-07-28", LEGACY])
def test_fuzz_raw_http(fuzz_http: HttpServer, era: str) -> None:
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    headers["MCP-Protocol-Version"] = era

    @FUZZ
    @given(raw=raw_messages)
    def one(raw: bytes) -> None:
        response = httpx2.post(fuzz_http.url, content=raw, headers=headers, timeout=60)
        assert response.status_code < 500, (raw[:200], response.status_code, response.text[:300])
        expected = screen(raw)
        if expected is not None:
            assert response.status_code == 400 and response.json() == json.loads(expected), (raw[:200], response.text)

    one()
    ok = httpx2.post(
        fuzz_http.url,
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": MODERN_META}},
        headers={**headers, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"},
        timeout=30,
    )
    assert ok.status_code == 200 and len(ok.json()["result"]["tools"]) == 6


async def test_a_parse_error_points_into_the_clients_message_not_our_framing(fuzz_stdio: StdioWire) -> None:
    """Found by the fuzz test: `{` was screened with its newline, and the error said "line 2 column 0"."""
    for raw, where in ((b"{", "line 1 column 1"), (b'{"a":\r', "line 1 column 5")):
        await fuzz_stdio.send(raw)
        reply = await fuzz_stdio.receive()
        assert reply["error"]["code"] == -32700 and reply["error"]["message"].endswith(f"at {where}"), reply
