"""The memory budget holds under concurrent calls, not only between them.

`sessions.max_memory_mb` bounds the interpreter states the server holds. Idle kept sessions
leave memory beyond it, but a session a call uses cannot: calls at once on many kept sessions
would load every state at once (20 calls on 20 kept 40 MB sessions: 800 MB against a 128 MB
budget). A call whose session must be brought into memory waits until the budget has room for
it (at most `sessions.memory_wait_seconds`), else it is refused with an error naming the budget.

Through a real `serve --http` process, small: 10 kept sessions of 6 MB against a 24 MB budget,
all called at once with no wait allowed. Without admission every call is served (all states
loaded together); with it, the calls beyond the budget are refused by name, those served
return their own session's variable, and nothing kept is lost. What this bounds in RSS is
measured by bench/session_capacity.py (the concurrency case).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.adversarial.http_wire import sdk_client
from tests.mcp_helpers import HttpServer, http_server, text

pytestmark = pytest.mark.anyio

MB = 1024 * 1024
BUDGET_MB = 24  # four 6 MB states
STATE_MB = 6
SESSIONS = 10


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
        "MCP_ANALYSIS_SESSIONS__MEMORY_WAIT_SECONDS": "0",
        "MCP_ANALYSIS_SANDBOX__MAX_STATE_MB": "16",
        "MCP_ANALYSIS_SANDBOX__WORKERS": "1",
        "MCP_ANALYSIS_SANDBOX__CODE_TIMEOUT": "120",
        "MCP_ANALYSIS_SANDBOX__CHECKOUT_TIMEOUT": "120",
    }
    with http_server(sample_db, env=env, log_dir=tmp_path) as server:
        handles = await make_kept_sessions(server)
        suffix = f"x[{STATE_MB * MB}:]"  # what makes each session's string its own: its number
        for tool, args in (("execute_code", {"code": f"{suffix}, len(x)"}), ("analysis_state", {})):
            results = await all_at_once(server, handles, tool, args)
            served = [n for n, r in enumerate(results) if not r.is_error]
            assert all(not r.is_error or refused_for_memory(r) for r in results), [text(r) for r in results]
            # One worker: loaded sessions wait for it while holding their state, so the budget runs out.
            assert 1 <= len(served) < SESSIONS, [text(r) for r in results]
            if tool == "execute_code":
                for n in served:
                    value = results[n].structured_content["value"]
                    assert value == f"('{n}', {STATE_MB * MB + len(str(n))})", value
        # Nothing was lost: refused or not, every session still holds its variable.
        async with sdk_client(server) as client:
            for n in (0, SESSIONS // 2, SESSIONS - 1):
                again = await client.call_tool("execute_code", {"code": suffix, "session": handles[n]})
                assert again.structured_content["value"] == f"'{n}'", text(again)
