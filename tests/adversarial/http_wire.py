"""A legacy (2025-era) streamable-HTTP client spoken by hand, as an attacker speaks it.

The SDK's client ends its HTTP session (DELETE) when it closes and holds a GET stream while
open; a hostile client does neither: it sends `initialize`, maybe a call, and walks away,
leaving the session open on the server. `X-Forwarded-For` names the client's address: the
server trusts it from loopback (uvicorn's default, as behind a local reverse proxy), so one
test process can play clients at many addresses.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.mcp_helpers import HttpServer

T = TypeVar("T")

LEGACY_VERSION = "2025-11-25"
ACCEPT = "application/json, text/event-stream"


class LegacyWire:
    """One hand-spoken legacy session (or a refused attempt to open one)."""

    def __init__(self, server: HttpServer, http: httpx2.AsyncClient, address: str | None = None) -> None:
        self.server = server
        self.http = http
        self.address = address
        self.session_id: str | None = None
        self._ids = 0

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": ACCEPT, "Content-Type": "application/json"}
        if self.address is not None:
            headers["X-Forwarded-For"] = self.address
        if self.session_id is not None:
            headers["mcp-session-id"] = self.session_id
            headers["mcp-protocol-version"] = LEGACY_VERSION
        return headers

    async def post(self, method: str, params: dict[str, Any] | None = None, *, notify: bool = False) -> httpx2.Response:
        body: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params or {}}
        if not notify:
            self._ids += 1
            body["id"] = self._ids
        return await self.http.post(self.server.url, content=json.dumps(body), headers=self._headers())

    async def initialize(self) -> httpx2.Response:
        """`initialize` alone (the flood's request); the session id is kept when one is issued."""
        params = {
            "protocolVersion": LEGACY_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "hostile", "version": "0"},
        }
        response = await self.post("initialize", params)
        self.session_id = response.headers.get("mcp-session-id")
        return response

    async def open(self) -> None:
        """A complete handshake (initialize + initialized); raises when the server refuses it."""
        response = await self.initialize()
        if response.status_code != 200 or self.session_id is None:
            raise RefusedError(response.status_code, response.text)
        await self.post("notifications/initialized", notify=True)

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """The `tools/call` result (or JSON-RPC error) as a dict; raises on an HTTP-level refusal."""
        response = await self.post("tools/call", {"name": name, "arguments": arguments})
        if response.status_code != 200:
            raise RefusedError(response.status_code, response.text)
        return reply_of(response)


class RefusedError(Exception):
    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body[:500]}")
        self.status = status
        self.body = body


def reply_of(response: httpx2.Response) -> dict[str, Any]:
    """The JSON-RPC message of a reply sent as JSON or as one SSE event."""
    if response.headers.get("content-type", "").startswith("application/json"):
        return dict(response.json())
    for line in response.text.splitlines():
        if line.startswith("data:") and line[5:].strip():
            message = json.loads(line[5:])
            if "result" in message or "error" in message:
                return dict(message)
    raise AssertionError(f"no JSON-RPC reply in {response.text[:500]!r}")


def tool_text(reply: dict[str, Any]) -> str:
    """What a tool result (or error) says, as one text."""
    if "error" in reply:
        return str(reply["error"].get("message", ""))
    return "\n".join(block.get("text", "") for block in reply["result"].get("content", []))


def is_tool_error(reply: dict[str, Any]) -> bool:
    return "error" in reply or bool(reply["result"].get("isError"))


def sdk_client(server: HttpServer, address: str | None = None, **kwargs: Any) -> Client:
    """The SDK's own client (`mode="legacy"` for a 2025-era one), seen by the server at `address`."""
    headers = {"X-Forwarded-For": address} if address is not None else {}
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(120.0))
    return Client(streamable_http_client(server.url, http_client=http), **kwargs)


async def flood(count: int, attempt: Callable[[int], Awaitable[T]], parallel: int = 8) -> list[T]:
    """`attempt(n)` for n in range(count), `parallel` at a time; the outcomes in order."""
    outcomes: dict[int, T] = {}
    limiter = anyio.Semaphore(parallel)

    async def one(n: int) -> None:
        async with limiter:
            outcomes[n] = await attempt(n)

    async with anyio.create_task_group() as tg:
        for n in range(count):
            tg.start_soon(one, n)
    return [outcomes[n] for n in range(count)]
