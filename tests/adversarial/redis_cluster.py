"""What the adversarial Redis tests share: a real redis-server, `serve --http` replicas on it, probes.

Everything is a real process on loopback (tests/services.py starts redis-server, tests/mcp_helpers.py
the servers); a test drives them through real MCP clients, and reads or writes Redis directly only
to play an attacker or an outage.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import httpx2
import redis as redis_client

from tests.mcp_helpers import HttpServer, text
from tests.services import free_port, redis

SECRET = "adversarial-redis-secret-0123456789abcdef"


def store_env(port: int, tmp: Path, *, url: str | None = None, **settings: Any) -> dict[str, str]:
    """Environment of a replica keeping its sessions in the Redis on `port` (or at `url`);
    `settings` by section and name, e.g. ``sessions__max_stored_mb=2``."""
    env = {
        "XDG_DATA_HOME": str(tmp / "data"),
        "MCP_ANALYSIS_SESSIONS__STORE": url or f"redis://127.0.0.1:{port}/0",
        "MCP_ANALYSIS_SESSIONS__SECRET": SECRET,
    }
    env.update({f"MCP_ANALYSIS_{key.upper()}": str(value) for key, value in settings.items()})
    return env


def healthz(server: HttpServer, token: str | None = None) -> httpx2.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx2.get(f"http://127.0.0.1:{server.port}/healthz", headers=headers, timeout=10)


def wait_ready(
    server: HttpServer, ready: bool = True, timeout: float = 120, token: str | None = None
) -> httpx2.Response:
    deadline = time.monotonic() + timeout
    while True:
        response = healthz(server, token)
        if (response.status_code == 200) == ready:
            return response
        if time.monotonic() > deadline:
            raise AssertionError(f"/healthz did not become {'ready' if ready else 'unready'}: {response.text}")
        time.sleep(0.25)


def session_of(result: Any) -> str:
    assert not result.is_error, text(result)
    return str(result.structured_content["session"])


class RestartableRedis:
    """A redis-server (tests/services.py) that a test can stop and start afresh on the same port."""

    def __init__(self, log_dir: Path, **options: str | int) -> None:
        self.log_dir = log_dir
        self.options = options
        self.port = free_port()
        self._running: contextlib.ExitStack | None = None

    def start(self) -> None:
        stack = contextlib.ExitStack()
        stack.enter_context(redis(self.log_dir, port=self.port, **self.options))
        self._running = stack

    def stop(self) -> None:
        if self._running is not None:
            self._running.close()
            self._running = None

    def client(self) -> redis_client.Redis:
        return redis_client.Redis(port=self.port, password=self.options.get("requirepass"))  # type: ignore[arg-type]
