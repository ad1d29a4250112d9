"""Real MCP servers for tests: stdio subprocesses and `serve --http` on loopback."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import REPO


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stdio_params(db: Path, *args: str, env: dict[str, str] | None = None) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcp_analysis", "--db", str(db), "serve", *args],
        env={**os.environ, **(env or {})},
        cwd=str(REPO),
    )


@dataclass
class HttpServer:
    url: str
    port: int
    process: subprocess.Popen[bytes]
    log: Path

    def client(self, token: str | None = None, **kwargs: Any) -> Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60.0))
        return Client(streamable_http_client(self.url, http_client=http), **kwargs)


@contextlib.contextmanager
def http_server(db: Path | str, *args: str, env: dict[str, str] | None = None, log_dir: Path) -> Iterator[HttpServer]:
    port = free_port()
    log = log_dir / f"server-{port}.log"
    with open(log, "wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "mcp_analysis", "--db", str(db), "serve", "--http", "--port", str(port), *args],
            cwd=REPO,
            env={**os.environ, **(env or {})},
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"server exited early:\n{log.read_text()}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"server did not start:\n{log.read_text()}")
            time.sleep(0.05)
        yield HttpServer(f"http://127.0.0.1:{port}/mcp", port, process, log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def text(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)
