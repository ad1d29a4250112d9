"""A session's workers and state under attack: every worker busy, a worker killed while it restores
a state, a redefined prelude, a state too large to keep. Each is contained and said.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from mcp_analysis.config import load_settings
from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.sandbox.interpreter import Interpreter
from mcp_analysis.sandbox.pool import WorkerPool
from mcp_analysis.session.analysis import AnalysisSession
from tests.conftest import make_settings
from tests.mcp_helpers import HttpServer, text

pytestmark = pytest.mark.anyio


async def test_busy_workers_error_reaches_the_client(two_worker_http: HttpServer) -> None:
    async with two_worker_http.client() as one, two_worker_http.client() as two, two_worker_http.client() as three:
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
    """A worker SIGKILLed during load_session (as the reliability run does) costs a retry, never the variables."""
    settings = load_settings(db=sample_db, sandbox={"workers": 1})
    async with KillOnLoadPool(settings.sandbox) as pool:
        interpreter = Interpreter(pool, settings.sandbox)
        assert (await interpreter.execute("keep = 12345")).success
        await interpreter.hibernate()
        pool.kill_next = True
        kept = await interpreter.execute("keep")
        assert kept.success and kept.value == "12345", kept
        assert "gone" not in kept.stderr


async def test_redefining_the_prelude_harms_only_its_own_session(kb: KnowledgeBase) -> None:
    """Sandbox code may rebind search, _mcp_search and _Record: its own session breaks until
    new_analysis; other sessions, and hibernation, are unaffected."""
    async with AnalysisSession(kb) as mine, AnalysisSession(kb) as other:
        tampered = await mine.execute(
            "class _Record:\n    def __init__(self, *a):\n        self.evil = True\n"
            "async def _mcp_search(q, l):\n    return [{'x': 1}]\nkept = 5\n(await search('revenue'))[0].evil"
        )
        assert tampered.value == "True"
        assert mine.interpreter is not None
        await mine.interpreter.hibernate()
        assert (await mine.execute("kept, (await search('revenue'))[0].evil")).value == "(5, True)"
        hits = await other.execute("h = await search('revenue', limit=2)\n(len(h), type(h[0]).__name__, h[0].rank)")
        assert hits.value == "(2, '_Record', 1)", hits.error
        await mine.new_analysis()
        restored = await mine.execute("r = (await search('revenue', limit=1))[0]\n(r.rank, repr(r)[:4])")
        assert restored.value == "(1, 'Hit(')", restored.error


MB = 1_000_000

GONE_X = "try:\n    x\n    gone = False\nexcept NameError:\n    gone = True\n(keep, gone)"


async def test_a_state_too_large_to_keep_is_reported(sample_db: Path) -> None:
    # A call that leaves 40-200 MB in variables succeeds, but its state is not kept (too large to
    # dump within the worker's memory, or over sandbox.max_state_mb): the result says so, since the
    # variables are gone on the next call. A kept dump stays under the bound, because it is held
    # in the server's memory and written to the session store on every call.
    kb = await KnowledgeBase.open(make_settings(sample_db, sandbox={"max_state_mb": 16}))
    async with AnalysisSession(kb) as session:
        assert (await session.execute("keep = 1")).success
        for size in (40_000_000, 200_000_000):
            result = await session.execute(f"x = 'a' * {size}\nlen(x)")
            assert result.success and result.state_restored and result.value == str(size), result
            assert "this call's variables were not kept" in result.stderr, result
            assert "sandbox.max_state_mb" in result.stderr or "MemoryError" in result.stderr, result.stderr
            after = await session.execute(GONE_X)
            assert after.value == "(1, True)", after
        assert len(session.interpreter_state or b"") < 16 * MB
    await kb.close()
