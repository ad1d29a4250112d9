from __future__ import annotations

import os
import signal
import statistics
from pathlib import Path

import anyio
import pytest

from mcp_analysis.config import Settings
from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.errors import SessionNotFoundError
from mcp_analysis.sandbox.pool import WorkerPool
from mcp_analysis.session.analysis import AnalysisSession
from mcp_analysis.session.keys import SessionKey
from mcp_analysis.session.manager import SessionManager
from tests.conftest import make_settings

pytestmark = pytest.mark.anyio


def defined(*names: str) -> str:
    """Sandbox code evaluating to a tuple of booleans: is each name defined? (monty has no dir())."""
    lines = ["_found = []"]
    for name in names:
        lines += ["try:", f"    {name}", "    _found.append(True)", "except NameError:", "    _found.append(False)"]
    return "\n".join([*lines, "tuple(_found)"])


async def test_state_persists_across_calls_and_errors(kb: KnowledgeBase) -> None:
    async with AnalysisSession(kb) as session:
        assert (
            await session.execute("import json\ncounts = {}\ndef bump(k):\n    counts[k] = counts.get(k, 0) + 1")
        ).success
        assert (await session.execute("bump('a')\nbump('a')\ncounts")).value == "{'a': 2}"
        failed = await session.execute("half = 1\nboom = 1 / 0")
        assert not failed.success
        assert "ZeroDivisionError" in failed.error and "line 2" in failed.error
        # REPL semantics: what ran before the error stays, functions and imports too.
        assert (await session.execute("(half, json.dumps(counts))")).value == "(1, '{\"a\": 2}')"
        assert len(session.state.executions) == 4
        assert [e.success for e in session.state.executions] == [True, True, False, True]


async def test_two_sessions_are_isolated(kb: KnowledgeBase) -> None:
    pool = WorkerPool(kb.settings.sandbox)
    async with pool:
        a = await AnalysisSession(kb, pool=pool).start()
        b = await AnalysisSession(kb, pool=pool).start()
        await a.execute("secret = 'a-only'")
        await a.search("revenue", limit=2)
        result = await b.execute("secret")
        assert not result.success and "NameError" in result.error
        assert b.state.searches == {} and "revenue" in a.state.searches
        await a.close()
        await b.close()


async def test_many_more_sessions_than_workers_keep_their_variables(kb: KnowledgeBase) -> None:
    settings = make_settings(kb.settings.db, sandbox={"workers": 2})
    pool = WorkerPool(settings.sandbox)
    async with pool:
        sessions = [await AnalysisSession(kb, pool=pool).start() for _ in range(200)]
        for i, session in enumerate(sessions):
            assert (await session.execute(f"mine = {i}\nhistory = [mine]")).success
        assert pool.attached <= 2
        assert pool.hibernations >= 198

        async def check(i: int, session: AnalysisSession) -> None:
            result = await session.execute("history.append(mine * 2)\n(mine, history)")
            assert result.value == f"({i}, [{i}, {2 * i}])", result

        async with anyio.create_task_group() as tg:  # concurrently, 2 workers for 200 sessions
            for i, session in enumerate(sessions):
                tg.start_soon(check, i, session)
        for session in sessions:
            await session.close()


async def test_killed_worker_is_recovered_with_last_good_state(kb: KnowledgeBase) -> None:
    async with AnalysisSession(kb) as session:
        assert (await session.execute("kept = 41")).success
        assert session.interpreter is not None and session.interpreter._session is not None
        os.kill(session.interpreter._session.worker_pid, signal.SIGKILL)
        await anyio.sleep(0.2)
        # Killed while idle: the next call transparently runs on a fresh worker with the state.
        assert (await session.execute("kept + 1")).value == "42"
        # Killed during a call: that call fails, saying the variables are kept.
        pid = session.interpreter._session.worker_pid  # only readable between calls
        assert pid is not None
        async with anyio.create_task_group() as tg:

            async def kill_soon() -> None:
                await anyio.sleep(0.5)
                os.kill(pid, signal.SIGKILL)

            tg.start_soon(kill_soon)
            result = await session.execute("lost = 1\nwhile True:\n    pass")
        assert not result.success and result.state_restored
        assert "Variables from before this call are kept" in result.error
        assert (await session.execute("kept")).value == "41"
        assert (await session.execute(defined("lost"))).value == "(False,)"


async def test_a_worker_killed_the_moment_before_a_call_is_replaced_not_failed(kb: KnowledgeBase) -> None:
    """kill -9 returns before the process is gone: a call sent at once must not be fed to it."""
    import psutil

    async with AnalysisSession(kb) as session:
        for round_ in range(20):
            assert (await session.execute(f"kept = {round_}")).success
            # the session's worker and any the pool keeps idle, as a process-group kill would
            for worker in psutil.Process().children(recursive=True):
                if "monty" in worker.name():
                    os.kill(worker.pid, signal.SIGKILL)
            again = await session.execute("kept + 1")
            assert again.value == str(round_ + 1), again


async def test_an_idle_worker_killed_in_the_pool_is_not_handed_out(kb: KnowledgeBase) -> None:
    import psutil

    pool = WorkerPool(kb.settings.sandbox)
    async with pool:
        for _ in range(5):
            async with AnalysisSession(kb, pool=pool) as before:
                assert (await before.execute("x = 1")).success
            # its worker went back to the pool's idle processes: kill those
            for worker in psutil.Process().children(recursive=True):
                if "monty" in worker.name():
                    os.kill(worker.pid, signal.SIGKILL)
            async with AnalysisSession(kb, pool=pool) as after:
                assert (await after.execute("20 + 22")).value == "42"


async def test_timeout_and_memory_blowup_roll_back(sample_db: Path) -> None:
    settings = make_settings(sample_db, sandbox={"code_timeout": 1.5, "max_memory_mb": 64})
    kb = await KnowledgeBase.open(settings)
    async with AnalysisSession(kb) as session:
        await session.execute("before = 'safe'")
        slow = await session.execute("partial = 1\nwhile True:\n    partial += 1")
        assert not slow.success and slow.state_restored
        assert "sandbox.code_timeout" in slow.error and "Variables from before this call are kept" in slow.error
        assert slow.duration_ms < 6000
        big = await session.execute("blob = 'x' * (200 * 1024 * 1024)")
        assert not big.success and big.state_restored
        assert "sandbox.max_memory_mb" in big.error
        assert (await session.execute("before")).value == "'safe'"
        assert (await session.execute(defined("partial", "blob"))).value == "(False, False)"
    await kb.close()


async def test_cancelled_call_rolls_back(kb: KnowledgeBase) -> None:
    async with AnalysisSession(kb) as session:
        await session.execute("stable = 7")
        with anyio.move_on_after(0.5):
            await session.execute("changed = 1\nwhile True:\n    pass")
        assert (await session.execute("stable")).value == "7"
        assert (await session.execute(defined("changed"))).value == "(False,)"


async def test_output_is_truncated_with_a_marker(sample_db: Path) -> None:
    kb = await KnowledgeBase.open(make_settings(sample_db, sandbox={"max_output_chars": 5000}))
    async with AnalysisSession(kb) as session:
        result = await session.execute("for i in range(10000):\n    print('line', i)\n'done'")
        assert result.success and result.truncated
        assert len(result.stdout) < 5300
        assert "output truncated" in result.stdout
        assert result.output_chars > 50_000
        assert result.value == "'done'"
    await kb.close()


async def test_new_analysis_clears_variables_but_keeps_citation_index(kb: KnowledgeBase) -> None:
    async with AnalysisSession(kb) as session:
        hits = await session.search("phishing campaign", limit=1)
        await session.cite([hits[0].chunk_id])
        await session.execute("x = 1")
        await session.new_analysis()
        assert session.state.executions == [] and session.state.citations == [] and session.state.searches == {}
        assert hits[0].chunk_id in session.state.citation_index
        assert "NameError" in (await session.execute("x")).error


async def test_sessions_survive_a_restart_and_expire(sample_settings: Settings) -> None:
    kb = await KnowledgeBase.open(sample_settings)
    async with WorkerPool(sample_settings.sandbox) as pool, SessionManager(kb, pool, sample_settings) as manager:
        session = await manager.create_handle(document_filter="uri LIKE '%report%'", owner=None)
        handle = session.id
        await session.execute("carried = ['over', 'restart']")
        await session.search("revenue", limit=1)
    # A new pool and manager: as after a server restart.
    async with WorkerPool(sample_settings.sandbox) as pool, SessionManager(kb, pool, sample_settings) as manager:
        key, own_filter = SessionKey.handle(handle), "uri LIKE '%report%'"
        # From disk, each binding is checked on its own: another filter, or another principal.
        with pytest.raises(SessionNotFoundError):
            await manager.get(key, document_filter=None, create=False)
        with pytest.raises(SessionNotFoundError):
            await manager.get(key, document_filter=own_filter, owner="mallory", create=False)
        restored = await manager.get(key, document_filter=own_filter, create=False)
        assert (await restored.execute("carried")).value == "['over', 'restart']"
        assert "revenue" in restored.state.searches
        # Live in memory, the same two checks, each alone.
        with pytest.raises(SessionNotFoundError):
            await manager.get(key, document_filter="uri LIKE '%'", create=False)
        with pytest.raises(SessionNotFoundError):
            await manager.get(key, document_filter=own_filter, owner="mallory", create=False)
        assert await manager.get(key, document_filter=own_filter, create=False) is restored
    short = make_settings(sample_settings.db, sessions={"dir": sample_settings.sessions.dir, "ttl_seconds": 0.001})
    async with WorkerPool(short.sandbox) as pool, SessionManager(kb, pool, short) as manager:
        await anyio.sleep(0.01)
        assert await manager.expire() >= 1
        with pytest.raises(SessionNotFoundError):
            await manager.get(SessionKey.handle(handle), document_filter="uri LIKE '%report%'", create=False)
    await kb.close()


async def test_tampered_session_file_is_not_loaded(sample_settings: Settings) -> None:
    kb = await KnowledgeBase.open(sample_settings)
    async with WorkerPool(sample_settings.sandbox) as pool, SessionManager(kb, pool, sample_settings) as manager:
        session = await manager.create_handle(document_filter=None, owner=None)
        await session.execute("v = 1")
        handle = session.id
    assert sample_settings.sessions.dir is not None
    chunks = [path for path in Path(sample_settings.sessions.dir).glob("*.chunks/*") if path.is_file()]
    assert chunks  # the interpreter state, kept as content-defined chunks named by a keyed digest
    chunks[0].write_bytes(chunks[0].read_bytes()[:-8] + b"tampered")
    async with WorkerPool(sample_settings.sandbox) as pool, SessionManager(kb, pool, sample_settings) as manager:
        with pytest.raises(SessionNotFoundError):
            await manager.get(SessionKey.handle(handle), document_filter=None, create=False)
    await kb.close()


async def test_statistics_module_works_and_survives_hibernation(kb: KnowledgeBase) -> None:
    settings = make_settings(kb.settings.db, sandbox={"workers": 1})
    async with WorkerPool(settings.sandbox) as pool:
        a = await AnalysisSession(kb, pool=pool).start()
        b = await AnalysisSession(kb, pool=pool).start()
        got = await a.execute("import statistics\nxs = [12.4, 13.1, 14.6, 15.3]\nstatistics.mean(xs)")
        assert got.success and float(got.value) == pytest.approx(13.85)
        await b.execute("y = 1")  # takes the only worker: `a` is hibernated
        again = await a.execute("(statistics.median(xs), round(statistics.stdev(xs), 3))")
        expected = (statistics.median([12.4, 13.1, 14.6, 15.3]), round(statistics.stdev([12.4, 13.1, 14.6, 15.3]), 3))
        assert again.value == repr(expected)
        empty = await a.execute("statistics.mean([])")
        assert not empty.success and "at least one data point" in empty.error
        await a.close()
        await b.close()
