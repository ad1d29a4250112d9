"""Raw JSON-RPC for the wire tests: a `serve` subprocess spoken to in bytes, and request bodies."""

from __future__ import annotations

import json
from typing import Any

import anyio
from anyio.abc import Process

LEGACY = "2025-11-25"
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def jsonrpc_request(request_id: int, method: str, params: dict[str, Any] | None = None) -> bytes:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        body["params"] = params
    return json.dumps(body).encode()


class StdioWire:
    def __init__(self, process: Process) -> None:
        self.process = process
        self.buffer = b""
        self.logged: list[dict[str, Any]] = []

    async def send(self, raw: bytes) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(raw + b"\n")

    async def receive(self) -> dict[str, Any]:
        """The next message, log messages to the host (`notifications/message`) set aside in `logged`."""
        assert self.process.stdout is not None
        while True:
            with anyio.fail_after(60):
                while b"\n" not in self.buffer:
                    self.buffer += await self.process.stdout.receive()
            line, self.buffer = self.buffer.split(b"\n", 1)
            message = json.loads(line)
            if message.get("method") != "notifications/message":
                return message
            self.logged.append(message)
