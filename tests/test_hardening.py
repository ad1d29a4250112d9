"""Failures found by hostile testing at the edges (issue 8), each reproduced through a real client.

One `serve --http` process for the module, with two workers, a short code timeout and a
short checkout wait so that "every worker busy" is reachable in seconds.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mcp_analysis.config import load_settings
from mcp_analysis.sandbox.interpreter import Interpreter
from mcp_analysis.sandbox.pool import WorkerPool
from tests.mcp_helpers import HttpServer, http_server, text

pytestmark = pytest.mark.anyio

ENV = {
    "MCP_ANALYSIS_SANDBOX__WORKERS": "2",
    "MCP_ANALYSIS_SANDBOX__CODE_TIMEOUT": "6",
    "MCP_ANALYSIS_SANDBOX__CHECKOUT_TIMEOUT": "1",
}


@pytest.fixture(scope="module")
def http(sample_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    logs = tmp_path_factory.mktemp("hardening")
    with http_server(sample_db, log_dir=logs, env={**ENV, "XDG_DATA_HOME": str(logs / "data")}) as server:
        yield server


def session_id_recorder(server: HttpServer, seen: list[str], **kwargs: Any) -> Client:
    """A client whose legacy `mcp-session-id` (issued by the server) is recorded in `seen`."""

    async def record(response: httpx2.Response) -> None:
        sid = response.headers.get("mcp-session-id")
        if sid and sid not in seen:
            seen.append(sid)

    http = httpx2.AsyncClient(timeout=httpx2.Timeout(60.0), event_hooks={"response": [record]})
    return Client(streamable_http_client(server.url, http_client=http), **kwargs)


# ------------------------------------------------------------------ 1. host functions


async def test_host_function_cannot_wipe_a_session_or_stall_others(http: HttpServer) -> None:
    """The issue's three calls: keep = 12345; quantiles(n=20M); keep."""
    async with http.client(mode="legacy") as victim, http.client(mode="legacy") as other:
        assert (await victim.call_tool("execute_code", {"code": "keep = 12345"})).structured_content["success"]
        latencies: list[float] = []
        done = anyio.Event()

        async def other_client() -> None:
            while not done.is_set():
                started = time.monotonic()
                listed = await other.call_tool("list_documents", {})
                latencies.append(time.monotonic() - started)
                assert listed.structured_content["total"] == 12
                await anyio.sleep(0.05)

        async with anyio.create_task_group() as tg:
            tg.start_soon(other_client)
            bomb = await victim.call_tool(
                "execute_code",
                {"code": "import statistics\nq = statistics.quantiles([1, 2, 3], n=20000000)\nlen(q)"},
            )
            await anyio.sleep(0.3)
            done.set()
        result = bomb.structured_content
        assert not result["success"]
        assert "statistics.quantiles()" in result["error"] and "sandbox.max_memory_mb" in result["error"]
        assert "19,999,999 values" in result["error"]
        after = await victim.call_tool("execute_code", {"code": "keep"})
        assert after.structured_content["value"] == "12345", after.structured_content
        again = await victim.call_tool("execute_code", {"code": "keep + 1"})
        assert again.structured_content["value"] == "12346"
        assert latencies and max(latencies) < 5, latencies  # "not blocked for seconds", generously


async def test_heavy_allowed_host_work_does_not_stall_other_clients(http: HttpServer) -> None:
    """statistics.* runs in monty's callback thread: near the cap, other clients keep being answered."""
    async with http.client(mode="legacy") as heavy, http.client(mode="legacy") as other:
        latencies: list[float] = []
        done = anyio.Event()

        async def other_client() -> None:
            while not done.is_set():
                started = time.monotonic()
                await other.call_tool("list_documents", {"limit": 3})
                latencies.append(time.monotonic() - started)
                await anyio.sleep(0.02)

        async with anyio.create_task_group() as tg:
            tg.start_soon(other_client)
            result = await heavy.call_tool(
                "execute_code", {"code": "import statistics\nstatistics.mean(list(range(2_000_000)))"}
            )
            done.set()
        assert result.structured_content["value"] == "999999.5", result.structured_content
        assert len(latencies) >= 3 and max(latencies) < 5, latencies


async def test_host_calls_are_bounded_by_the_session_limits(http: HttpServer) -> None:
    async with http.client(mode="legacy") as client:
        code = (
            "import statistics\nfrom pathlib import Path\nout = []\n"
            "for f in [lambda: statistics.mean(list(range(3_000_000))),\n"
            "          lambda: Path('/documents/' + 'x' * 5000).exists(),\n"
            "          lambda: open('/documents/' + 'y' * 10000).read()]:\n"
            "    try:\n        f()\n        out.append('no error')\n"
            "    except Exception as e:\n        out.append(type(e).__name__ + ': ' + str(e)[:90])\n"
            "ok = statistics.median([5, 1, 3])\nout"
        )
        result = (await client.call_tool("execute_code", {"code": code})).structured_content
        assert result["success"], result
        mean_error, long_path, long_open = eval(result["value"])  # a list of three strings
        assert mean_error.startswith("ValueError: statistics.mean(): the arguments hold more than 2,097,152 values")
        assert "File name too long" in long_path and "File name too long" in long_open
        still = await client.call_tool("execute_code", {"code": "ok, len(await list_documents(offset=10))"})
        assert still.structured_content["value"] == "(3, 2)"


async def test_a_suspended_host_failure_rolls_back_truthfully(sample_db: Path) -> None:
    """A host result over monty's frame limit leaves the worker suspended: never dump that."""
    settings = load_settings(db=sample_db)
    async with WorkerPool(settings.sandbox) as pool:
        interpreter = Interpreter(pool, settings.sandbox)
        assert (await interpreter.execute("keep = 12345")).success
        failed = await interpreter.execute("x = big()", functions={"big": lambda: b"x" * 270_000_000})
        assert not failed.success and failed.state_restored
        assert "Variables from before this call are kept" in (failed.error or "")
        kept = await interpreter.execute("keep")
        assert kept.success and kept.value == "12345", kept
        assert (await interpreter.execute("keep * 2")).value == "24690"


# ---------------------------------------------------------------- 2. errors reach the client


async def test_busy_workers_error_reaches_the_client(http: HttpServer) -> None:
    async with http.client() as one, http.client() as two, http.client() as three:
        results: list[Any] = []

        async def spin(client: Client) -> None:
            results.append(await client.call_tool("execute_code", {"code": "while True:\n    pass"}))

        async with anyio.create_task_group() as tg:
            tg.start_soon(spin, one)
            tg.start_soon(spin, two)
            await anyio.sleep(2.0)  # both workers are in the loop now
            blocked = await three.call_tool("execute_code", {"code": "1 + 1"})
        assert blocked.is_error
        assert "All 2 interpreter workers are busy" in text(blocked), text(blocked)
        assert all("sandbox.code_timeout" in r.structured_content["error"] for r in results)
        assert (await three.call_tool("execute_code", {"code": "1 + 1"})).structured_content["value"] == "2"


# ------------------------------------------------------------------ 6. identity


async def test_a_modern_request_cannot_ride_a_legacy_session(http: HttpServer) -> None:
    seen: list[str] = []
    async with session_id_recorder(http, seen, mode="legacy") as legacy:
        await legacy.call_tool("execute_code", {"code": "secret = 'legacy-only'"})
        assert len(seen) == 1
        stolen_header = httpx2.AsyncClient(timeout=httpx2.Timeout(60.0), headers={"mcp-session-id": seen[0]})
        async with Client(streamable_http_client(http.url, http_client=stolen_header)) as attacker:
            assert attacker.protocol_version == "2026-07-28"
            probe = await attacker.call_tool("execute_code", {"code": "secret"})
            assert "legacy-only" not in text(probe)
            assert "NameError" in probe.structured_content["error"]
            state = await attacker.call_tool("analysis_state", {})
            own = await legacy.call_tool("analysis_state", {})
            assert state.structured_content["session"] != own.structured_content["session"]
        assert (await legacy.call_tool("execute_code", {"code": "secret"})).structured_content[
            "value"
        ] == "'legacy-only'"


async def test_an_ended_legacy_session_frees_its_analysis(http: HttpServer) -> None:
    """The SDK's real path: the client ends its HTTP session (DELETE) and the server drops its analysis."""
    async with http.client() as other:
        async with http.client(mode="legacy") as legacy:
            first = await legacy.call_tool("execute_code", {"code": "x = 41"})
            analysis_id = first.structured_content["session"]
            live = await other.call_tool("execute_code", {"code": "x + 1", "session": analysis_id})
            assert live.structured_content["value"] == "42"  # live: readable by its handle
        with anyio.fail_after(20):
            while True:
                probe = await other.call_tool("execute_code", {"code": "x + 1", "session": analysis_id})
                if probe.is_error:
                    break
                await anyio.sleep(0.2)
        assert "Unknown or expired analysis session" in text(probe)


class KillOnLoadPool(WorkerPool):
    """Fault injection: the next worker handed out is SIGKILLed before it can load a state."""

    kill_next = False

    async def acquire(self, owner: Any) -> Any:
        session = await super().acquire(owner)
        if self.kill_next and session.worker_pid is not None:
            self.kill_next = False
            os.kill(session.worker_pid, signal.SIGKILL)
            await anyio.sleep(0.2)
        return session


async def test_a_worker_killed_while_restoring_does_not_lose_the_state(sample_db: Path) -> None:
    """Seen in the reliability run: a worker SIGKILL during load_session wiped the session's variables."""
    settings = load_settings(db=sample_db, sandbox={"workers": 1})
    async with KillOnLoadPool(settings.sandbox) as pool:
        interpreter = Interpreter(pool, settings.sandbox)
        assert (await interpreter.execute("keep = 12345")).success
        await interpreter.hibernate()
        pool.kill_next = True
        kept = await interpreter.execute("keep")
        assert kept.success and kept.value == "12345", kept
        assert "gone" not in kept.stderr
