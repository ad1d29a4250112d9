"""One client cannot take what every client shares: the interpreter workers and the chart renderer.

Eighth hostile round: a bearer token running `while True: pass` in as many sessions as there are
workers locked every other token out of execute_code for as long as it kept going; a session
queuing ten charts that each run to `charts.render_timeout` made another session's one-bar
chart give up ("the chart renderer is busy"). Real monty workers and the real renderer process.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.errors import SandboxError
from mcp_analysis.sandbox.pool import WorkerPool
from mcp_analysis.session.analysis import AnalysisSession
from tests.conftest import make_settings

pytestmark = pytest.mark.anyio

SPIN = "while True:\n    pass"


@contextlib.asynccontextmanager
async def shared_pool(db: Path, tmp_path: Path, **sandbox: Any) -> AsyncIterator[tuple[KnowledgeBase, WorkerPool]]:
    """The knowledge base and one worker pool its sessions share, with these sandbox settings."""
    settings = make_settings(db, sessions={"dir": tmp_path / "sessions", "persist": False}, sandbox=sandbox)
    kb = await KnowledgeBase.open(settings)
    try:
        async with WorkerPool(settings.sandbox) as pool:
            yield kb, pool
    finally:
        await kb.close()


async def test_one_principal_running_code_in_every_session_leaves_a_worker_for_another(
    sample_db: Path, tmp_path: Path
) -> None:
    async with shared_pool(sample_db, tmp_path, workers=2, code_timeout=4, checkout_timeout=1.5) as (kb, pool):
        alice = [await AnalysisSession(kb, pool=pool, owner="alice").start() for _ in range(3)]
        bob = await AnalysisSession(kb, pool=pool, owner="bob").start()
        for session in alice:  # each keeps a worker while idle (the third takes one back)
            assert (await session.execute("x = 1")).success
        spun: list[str] = []

        async def spin(session: AnalysisSession) -> None:
            try:
                spun.append((await session.execute(SPIN)).error or "")
            except SandboxError as exc:  # the tool turns it into the call's error
                spun.append(str(exc))

        async with anyio.create_task_group() as tg:
            for session in alice:
                tg.start_soon(spin, session)
            await anyio.sleep(0.5)
            started = time.monotonic()
            answer = await bob.execute("1 + 1")
            waited = time.monotonic() - started
        assert answer.success and answer.value == "2", answer.error
        assert waited < 3.0, f"bob waited {waited:.1f} s for a worker"  # alice's loop runs 4 s
        errors = sorted(spun)
        assert sum("sandbox.code_timeout" in e for e in errors) == 1, errors  # alice ran one loop
        kept_back = [e for e in errors if "kept for other clients" in e]
        assert len(kept_back) == 2, errors  # her others waited, then were told why
        assert "1 of the 2 interpreter workers are running this client's other calls" in kept_back[0]
        # Nothing was lost: her sessions keep their variables and run again once her loop ended.
        assert all([(await s.execute("x")).value == "1" for s in alice])
        for session in (*alice, bob):
            await session.close()


@pytest.mark.parametrize(
    ("owner", "keep"),
    [(None, True), ("alice", False)],
    ids=["anonymous sessions are parties of their own", "keep_worker_for_others off"],
)
async def test_two_sessions_run_on_both_workers_where_no_other_client_is_kept_for(
    sample_db: Path, tmp_path: Path, owner: str | None, keep: bool
) -> None:
    """The rule keeps a worker for *another* client: two anonymous sessions (two clients) use both
    workers, and so do one token's two sessions with `sandbox.keep_worker_for_others: false`."""
    async with shared_pool(
        sample_db, tmp_path, workers=2, code_timeout=2, checkout_timeout=0.5, keep_worker_for_others=keep
    ) as (kb, pool):
        one, two = [await AnalysisSession(kb, pool=pool, owner=owner).start() for _ in range(2)]
        spun: list[Any] = []

        async def spin(session: AnalysisSession) -> None:
            spun.append(await session.execute(SPIN))

        async with anyio.create_task_group() as tg:
            tg.start_soon(spin, one)
            tg.start_soon(spin, two)
        assert [("sandbox.code_timeout" in (r.error or "")) for r in spun] == [True, True], spun
        await one.close()
        await two.close()


async def test_a_busy_pool_is_called_busy_when_another_client_holds_the_last_worker(
    sample_db: Path, tmp_path: Path
) -> None:
    """Nothing is "kept for other clients" when another client is using it: the message says busy."""
    async with shared_pool(sample_db, tmp_path, workers=2, code_timeout=2.5, checkout_timeout=0.5) as (kb, pool):
        alice, alice_again = [await AnalysisSession(kb, pool=pool, owner="alice").start() for _ in range(2)]
        bob = await AnalysisSession(kb, pool=pool, owner="bob").start()
        async with anyio.create_task_group() as tg:
            tg.start_soon(alice.execute, SPIN)
            tg.start_soon(bob.execute, SPIN)
            await anyio.sleep(1.0)
            with pytest.raises(SandboxError) as refused:
                await alice_again.execute("1")
        assert str(refused.value).startswith("All 2 interpreter workers are busy running code"), refused.value
        for session in (alice, alice_again, bob):
            await session.close()


BIG_STATE = "rows = [str(i) * 20 for i in range(400_000)]"  # ~55 MB kept: its reload takes ~0.3 s


async def test_a_call_cancelled_while_its_state_reloads_gives_its_worker_back(sample_db: Path, tmp_path: Path) -> None:
    """Eighth hostile round (HIGH): the worker taken for the reload stayed counted with no
    interpreter holding it, and the next checkout spun the event loop forever (every client hung)."""
    async with shared_pool(sample_db, tmp_path, workers=2, code_timeout=10, checkout_timeout=3) as (kb, pool):
        attacker, one, two = [await AnalysisSession(kb, pool=pool).start() for _ in range(3)]
        assert (await attacker.execute(BIG_STATE)).success
        assert attacker.interpreter is not None
        await attacker.interpreter.hibernate()  # as idle release or another client's checkout does
        assert (pool.in_use, pool.attached) == (0, 0)
        with anyio.move_on_after(0.1) as scope:  # the client cancels while the state reloads
            await attacker.execute("len(rows)")
        assert scope.cancelled_caught
        assert (pool.in_use, pool.attached) == (0, 0), (pool.in_use, pool.attached)
        with anyio.fail_after(20):  # the event loop still turns: other clients are answered
            assert (await one.execute("1")).value == "1"
            assert (await two.execute("2")).value == "2"
            kept = await attacker.execute("len(rows)")
        assert kept.success and kept.value == "400000", kept  # the cancelled call lost nothing
        for session in (attacker, one, two):
            await session.close()


async def test_a_clients_cheap_calls_take_back_its_own_idle_worker_not_anothers(
    sample_db: Path, tmp_path: Path
) -> None:
    """Eighth hostile round: one token calling `1` from two sessions between another client's
    calls made that client reload its 55 MB state every time (0.9 ms -> 330-390 ms a call)."""
    async with shared_pool(sample_db, tmp_path, workers=2, code_timeout=30, max_state_mb=200) as (kb, pool):
        victim = await AnalysisSession(kb, pool=pool, owner="victim").start()
        mallory = [await AnalysisSession(kb, pool=pool, owner="mallory").start() for _ in range(2)]
        anonymous = await AnalysisSession(kb, pool=pool).start()  # another party, a small state
        assert (await victim.execute(BIG_STATE)).success
        assert victim.interpreter is not None
        for _ in range(3):
            for session in (*mallory, anonymous):
                assert (await session.execute("1")).success
                assert victim.interpreter.attached  # her own idle worker, or the small state's
            assert (await victim.execute("len(rows)")).value == "400000"
        for session in (victim, *mallory, anonymous):
            await session.close()


SLOW_CHARTS = """
import asyncio
spec = {"data": {"values": [{"a": i} for i in range(2000)]},
        "transform": [{"calculate": "length(sequence(0, 1000000))", "as": "n"}],
        "mark": "bar", "encoding": {"x": {"field": "n", "type": "quantitative", "aggregate": "sum"}}}
async def one():
    try:
        await chart(spec)
        return "drawn"
    except Exception as exc:
        return type(exc).__name__
await asyncio.gather(*[one() for _ in range(10)])
"""
ONE_BAR = 'await chart({"data": {"values": [{"a": 1}]}, "mark": "bar", "encoding": {"x": {"field": "a"}}})'


async def test_a_session_queuing_slow_charts_cannot_starve_anothers_chart(sample_db: Path, tmp_path: Path) -> None:
    settings = make_settings(
        sample_db,
        sessions={"dir": tmp_path / "sessions"},
        charts={"render_timeout": 2.0},
        sandbox={"code_timeout": 2.0},  # the call ends (cancelled) with charts still in line
    )
    kb = await KnowledgeBase.open(settings)
    try:
        async with AnalysisSession(kb) as attacker, AnalysisSession(kb) as victim:
            assert (await victim.execute(ONE_BAR)).success  # the renderer is started and warm
            results: dict[str, Any] = {}

            async def attack() -> None:
                results["attack"] = await attacker.execute(SLOW_CHARTS)

            async with anyio.create_task_group() as tg:
                tg.start_soon(attack)
                await anyio.sleep(1.0)  # the first slow chart renders, nine wait
                # ... on the event loop, not in threads: other work's threads stay free.
                assert anyio.to_thread.current_default_thread_limiter().borrowed_tokens <= 1
                started = time.monotonic()
                drawn = await victim.execute(ONE_BAR)
                waited = time.monotonic() - started
            assert drawn.success, drawn.error
            assert waited < 2.0 + 1.5, f"the one-bar chart waited {waited:.1f} s"  # the render in progress, then it
            # The attacking call ran out of time with charts still waiting: they left the line, so
            # its own next chart is drawn at once rather than after its abandoned ones.
            assert "sandbox.code_timeout" in (results["attack"].error or ""), results["attack"]
            # A slow chart the attack's turn had begun still ends, by its render_timeout, killing the
            # renderer; the next chart then starts a fresh one, which on busy cores alone can take
            # the 2 s the call has. So that render ends, and a chart of another party restarts the
            # renderer. Abandoned charts still in line would be rendering by now, one after another.
            await anyio.sleep(2.0 + 0.5)
            for _ in range(3):
                if (await victim.execute(ONE_BAR)).success:
                    break
            started = time.monotonic()
            again = await attacker.execute(ONE_BAR)
            assert again.success, again.error
            assert time.monotonic() - started < 2.0 + 1.5
    finally:
        await kb.close()
