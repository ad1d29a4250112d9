"""The memory budget holds under concurrent calls, not only between them.

`sessions.max_memory_mb` bounds the interpreter states the server holds. Idle kept sessions
leave memory beyond it, but a session a call uses cannot: 20 calls at once on 20 kept 40 MB
sessions would load all 20 states (800 MB against a 128 MB budget). A call whose session must
be brought into memory waits until the budget has room for it (at most
`sessions.memory_wait_seconds`), else it is refused with an error naming the budget.

Through a real `serve --http` process; peak RSS of the server and its interpreter workers is
sampled with psutil while the calls run. The bound is derived from the budget, the workers
(each may hold one state being run, plus its dump on the way back) and the baseline measured
in the same run; it is generous (noise, allocator slack) yet far below what 20 loaded states take.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from tests.adversarial.http_wire import sdk_client
from tests.mcp_helpers import HttpServer, http_server, text

pytestmark = pytest.mark.anyio

MB = 1024 * 1024
BUDGET_MB = 128
STATE_MB = 40
SESSIONS = 20
WORKERS = 2
SLACK_MB = 150  # allocator and interpreter noise under a loaded machine


def tree_rss(process: psutil.Process) -> int:
    total = 0
    for proc in [process, *process.children(recursive=True)]:
        try:
            total += proc.memory_info().rss
        except psutil.Error:
            continue
    return total


@contextmanager
def peak_rss(pid: int) -> Iterator[list[int]]:
    """Samples the RSS of `pid` and its children every 20 ms; yields [peak] (filled on exit)."""
    process = psutil.Process(pid)
    peak = [tree_rss(process)]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], tree_rss(process))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield peak
    finally:
        done.set()
        sampler.join()


async def make_kept_sessions(server: HttpServer) -> list[str]:
    handles = []
    async with sdk_client(server) as client:
        for n in range(SESSIONS):
            code = f"x = 'ab' * {STATE_MB * MB // 2} + '{n}'"
            result = await client.call_tool("execute_code", {"code": code})
            assert not result.is_error and result.structured_content["success"], text(result)
            handles.append(result.structured_content["session"])
    return handles


async def all_at_once(server: HttpServer, handles: list[str], tool: str, args: dict[str, Any]) -> list[Any]:
    results: list[Any] = [None] * len(handles)
    async with sdk_client(server) as client:

        async def one(n: int) -> None:
            results[n] = await client.call_tool(tool, {**args, "session": handles[n]})

        async with anyio.create_task_group() as tg:
            for n in range(len(handles)):
                tg.start_soon(one, n)
    return results


def refused_for_memory(result: Any) -> bool:
    return bool(result.is_error) and "sessions.max_memory_mb" in text(result)


async def test_concurrent_calls_on_kept_sessions_stay_within_the_budget(sample_db: Path, tmp_path: Path) -> None:
    env = {
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "MCP_ANALYSIS_SESSIONS__DIR": str(tmp_path / "sessions"),
        "MCP_ANALYSIS_SESSIONS__MAX_MEMORY_MB": str(BUDGET_MB),
        "MCP_ANALYSIS_SANDBOX__WORKERS": str(WORKERS),
        "MCP_ANALYSIS_SANDBOX__CODE_TIMEOUT": "120",
        "MCP_ANALYSIS_SANDBOX__CHECKOUT_TIMEOUT": "120",
    }
    with http_server(sample_db, env=env, log_dir=tmp_path) as server:
        handles = await make_kept_sessions(server)
        await anyio.sleep(1)
        baseline = tree_rss(psutil.Process(server.process.pid))
        bound = baseline + (BUDGET_MB + WORKERS * 3 * STATE_MB + SLACK_MB) * MB
        suffix = f"x[{STATE_MB * MB}:]"  # what makes each session's string its own: its number
        for tool, args in (("execute_code", {"code": f"{suffix}, len(x)"}), ("analysis_state", {})):
            with peak_rss(server.process.pid) as peak:
                results = await all_at_once(server, handles, tool, args)
            served = [r for r in results if not r.is_error]
            assert all(not r.is_error or refused_for_memory(r) for r in results), [text(r) for r in results]
            assert len(served) >= 3, [text(r) for r in results]
            if tool == "execute_code":
                for n, result in enumerate(results):
                    if not result.is_error:
                        value = result.structured_content["value"]
                        assert value == f"('{n}', {STATE_MB * MB + len(str(n))})", value
            assert peak[0] <= bound, (
                f"{tool}: peak {peak[0] / MB:,.0f} MB, baseline {baseline / MB:,.0f} MB, bound {bound / MB:,.0f} MB"
            )
        # Nothing was lost: every session still holds its variable.
        async with sdk_client(server) as client:
            for n in (0, SESSIONS // 2, SESSIONS - 1):
                again = await client.call_tool("execute_code", {"code": suffix, "session": handles[n]})
                assert again.structured_content["value"] == f"'{n}'", text(again)
