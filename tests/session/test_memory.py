"""The server-wide memory budget for interpreter states (sessions.max_memory_mb).

Without it, every live session would hold its last state in the server's memory, bounded only
by count (10,000 sessions x sandbox.max_state_mb 64 MB): anonymous HTTP clients each keeping a
50 MB string would grow the server by ~48 MB per call (measured: 12 calls, 116 -> 966 MB),
enough to run a 24 GB machine out of memory in a few minutes. With it, idle sessions kept in
the store leave memory beyond the budget (and come back on their next call), and sessions that
live only in memory cannot grow past it (the call says so; earlier variables stay).
"""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import anyio
import httpx2
import pytest

from mcp_analysis.config import Settings
from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.errors import SessionLimitError
from mcp_analysis.sandbox.pool import WorkerPool
from mcp_analysis.session.keys import SessionKey
from mcp_analysis.session.manager import SessionManager
from mcp_analysis.session.scope import call_scope
from tests.conftest import make_settings
from tests.mcp_helpers import http_server, metric_samples, text

pytestmark = pytest.mark.anyio

MB = 1024 * 1024


def _big(n: int, megabytes: int) -> str:
    # A string of about `megabytes` MB that differs per session and does not repeat itself (a store
    # keeps a dump's repeated chunks once: 'ab' * N would take it a few KB).
    return f"x = '-'.join([str(i * 7 + {n}) for i in range({megabytes * MB // 5})])[:{megabytes * MB}] + '{n}'"


async def test_idle_kept_sessions_leave_memory_beyond_the_budget_and_come_back(sample_db: Path, tmp_path: Path) -> None:
    sessions = {"dir": tmp_path / "sessions", "max_memory_mb": 16}
    settings = make_settings(sample_db, sessions=sessions, sandbox={"max_state_mb": 8})
    kb = await KnowledgeBase.open(settings)
    async with WorkerPool(settings.sandbox) as pool, SessionManager(kb, pool, settings) as manager:
        ids, refs = [], []
        gc.disable()  # a dropped session must be freed at once, not when cycles are collected
        try:
            for n in range(5):
                session = await manager.create_handle(document_filter=None, owner=None)
                result = await session.execute(_big(n, 5))
                assert result.success and not result.state_restored, result
                ids.append(session.id)
                refs.append(weakref.ref(session))
                del session
                assert manager.memory.state_bytes <= 16 * MB
            assert manager.memory.evictions >= 2
            assert len(manager) < 5  # some were dropped from memory...
            assert sum(ref() is not None for ref in refs) == len(manager)  # ...and freed
        finally:
            gc.enable()
        for n, handle in enumerate(ids):  # ...and every one continues, from the store
            session = await manager.resolve(handle, owner=None, document_filter=None)
            result = await session.execute("x[-1], len(x)")
            assert result.value == f"('{n}', {5 * MB + 1})", result
            assert manager.memory.state_bytes <= 16 * MB
    await kb.close()


async def test_sessions_that_live_only_in_memory_cannot_pass_the_budget(sample_db: Path, tmp_path: Path) -> None:
    # No session store: nothing can be dropped from memory without losing it.
    sessions = {"dir": tmp_path / "sessions", "persist": False, "max_memory_mb": 16}
    settings = make_settings(sample_db, sessions=sessions, sandbox={"max_state_mb": 8})
    kb = await KnowledgeBase.open(settings)
    async with WorkerPool(settings.sandbox) as pool, SessionManager(kb, pool, settings) as manager:
        first, second, third = [
            await manager.get(SessionKey.http(name), document_filter=None) for name in ("first", "second", "third")
        ]
        for n, session in enumerate((first, second, third)):
            assert (await session.execute("y = 'kept'")).success
            result = await session.execute(_big(n, 6))
            assert result.success
        assert first.interpreter_state is not None and manager.memory.state_bytes <= 16 * MB
        refused = result
        assert refused.state_restored
        assert "sessions.max_memory_mb" in refused.stderr and "variables were not kept" in refused.stderr
        assert (await third.execute("y")).value == "'kept'"  # its earlier variables stay
        gone = await third.execute("x")
        assert not gone.success and "NameError" in (gone.error or "")
        for n, session in enumerate((first, second)):  # nobody else lost anything
            assert (await session.execute("x[-1], y")).value == f"('{n}', 'kept')"
        assert manager.memory.evictions == 0
    await kb.close()


async def test_anonymous_http_clients_cannot_grow_the_server_past_the_budget(sample_db: Path, tmp_path: Path) -> None:
    env = {
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "MCP_ANALYSIS_SESSIONS__DIR": str(tmp_path / "sessions"),
        "MCP_ANALYSIS_SESSIONS__MAX_MEMORY_MB": "32",
        "MCP_ANALYSIS_SANDBOX__MAX_STATE_MB": "8",  # the budget is at least one session's most
    }
    with http_server(sample_db, env=env, log_dir=tmp_path) as server:
        handles = []
        for n in range(8):  # 8 anonymous clients x 6 MB = 48 MB of state
            async with server.client() as client:
                result = await client.call_tool("execute_code", {"code": _big(n, 6)})
                assert not result.is_error, text(result)
                handles.append(result.structured_content["session"])
        metrics = await _metrics(server.port)
        assert 0 < metrics["mcp_analysis_sessions_state_bytes"] <= 32 * MB
        assert metrics["mcp_analysis_session_memory_evictions_total"] >= 2
        async with server.client() as client:
            for n, handle in enumerate(handles):
                again = await client.call_tool("execute_code", {"code": "x[-1]", "session": handle})
                assert not again.is_error and again.structured_content["value"] == f"'{n}'", text(again)
        assert (await _metrics(server.port))["mcp_analysis_sessions_state_bytes"] <= 32 * MB


async def _metrics(port: int) -> dict[str, float]:
    def fetch() -> str:
        return httpx2.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text

    return metric_samples(await anyio.to_thread.run_sync(fetch))


async def check_stored_bytes_bound(settings: Settings) -> None:
    """sessions.max_stored_mb (16 on disk, 20 in Redis: Redis holds a 5 MB string in a 6 MB
    allocation, and the cap counts what Redis holds) bounds what the store keeps, for new and
    growing sessions alike; a refused call keeps nothing, and room comes back when a session goes."""
    kb = await KnowledgeBase.open(settings)
    async with WorkerPool(settings.sandbox) as pool, SessionManager(kb, pool, settings) as manager:
        first, second, third = [await manager.create_handle(document_filter=None, owner=None) for _ in range(3)]
        assert (await first.execute(_big(0, 5))).success
        assert (await second.execute(_big(1, 5))).success
        assert (await third.execute("y = 'small'")).success
        cap = settings.sessions.max_stored_mb
        with pytest.raises(SessionLimitError, match=rf"more than {cap} MB \(sessions.max_stored_mb\)"):
            await third.execute(_big(2, 8))  # 5 + 5 + 8 MB past the cap (6 + 6 + 10 MB in Redis)
        again = await manager.resolve(third.id, owner=None, document_filter=None)
        assert (await again.execute("y")).value == "'small'"  # as before the refused call
        assert not (await again.execute("x")).success
        await manager.drop(SessionKey.handle(second.id))  # a session goes: room again
        again = await manager.resolve(third.id, owner=None, document_filter=None)
        assert (await again.execute(_big(2, 8))).success
        assert (await again.execute("x[-1], y")).value == "('2', 'small')"
        for session in (first, again):
            await manager.drop(SessionKey.handle(session.id))
    await kb.close()


async def test_the_file_store_keeps_at_most_max_stored_mb(sample_db: Path, tmp_path: Path) -> None:
    sessions = {"dir": tmp_path / "sessions", "max_stored_mb": 16}
    await check_stored_bytes_bound(make_settings(sample_db, sessions=sessions, sandbox={"max_state_mb": 10}))
    kept = sum(f.stat().st_size for f in (tmp_path / "sessions").glob("*.chunks/*"))
    assert kept == 0  # all dropped at the end: nothing left behind


async def test_a_session_a_call_holds_is_not_dropped_under_it(sample_db: Path, tmp_path: Path) -> None:
    # A call that resolved its session (searching, or about to run code) holds it until it ends.
    # Dropped from memory under it, a parallel call on the same session loaded a second copy
    # from the store, and one of the two failed as "changed by another call" (file store).
    sessions = {"dir": tmp_path / "sessions", "max_memory_mb": 16}
    settings = make_settings(sample_db, sessions=sessions, sandbox={"max_state_mb": 8})
    kb = await KnowledgeBase.open(settings)
    async with WorkerPool(settings.sandbox) as pool, SessionManager(kb, pool, settings) as manager:
        first = await manager.create_handle(document_filter=None, owner=None)
        assert (await first.execute(_big(0, 5))).success
        handle = first.id
        del first
        async with call_scope():  # call A on the session
            a = await manager.resolve(handle, owner=None, document_filter=None)
            for n in range(1, 4):  # meanwhile, other clients' calls: 20 MB of state in all
                other = await manager.create_handle(document_filter=None, owner=None)
                assert (await other.execute(_big(n, 5))).success
            assert manager.memory.evictions >= 1 and manager.memory.state_bytes <= 16 * MB + 5 * MB
            async with call_scope():  # call B, in parallel, on the same session
                b = await manager.resolve(handle, owner=None, document_filter=None)
                assert b is a
                assert (await b.execute("y = 'B'")).success
            assert (await a.execute("z = 'A'")).success
        assert manager.memory.state_bytes <= 16 * MB  # once no call holds it, it may go
        again = await manager.resolve(handle, owner=None, document_filter=None)
        assert (await again.execute("x[-1], y, z")).value == "('0', 'B', 'A')"
    await kb.close()


async def test_the_store_bound_is_at_least_one_sessions_largest_state(sample_db: Path, tmp_path: Path) -> None:
    # Below sandbox.max_state_mb, "the session store is full" would be said of an empty store.
    settings = make_settings(
        sample_db, sessions={"dir": tmp_path / "sessions", "max_stored_mb": 1}, sandbox={"max_state_mb": 8}
    )
    kb = await KnowledgeBase.open(settings)
    async with WorkerPool(settings.sandbox) as pool, SessionManager(kb, pool, settings) as manager:
        session = await manager.create_handle(document_filter=None, owner=None)
        assert (await session.execute(_big(0, 5))).success
        with pytest.raises(SessionLimitError, match=r"more than 8 MB \(sessions\.max_stored_mb\)"):  # 5 + 5 MB > 8 MB
            await (await manager.create_handle(document_filter=None, owner=None)).execute(_big(1, 5))
    await kb.close()
