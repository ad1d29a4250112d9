"""Host functions (statistics.*, the /documents files) under hostile arguments: every call is bounded
by the session's limits, refused before it computes, and neither wipes the session nor stalls others.
"""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

from mcp_analysis.config import load_settings
from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.sandbox.bounds import HostBounds, HostLimitError
from mcp_analysis.sandbox.interpreter import Interpreter
from mcp_analysis.sandbox.pool import WorkerPool
from mcp_analysis.sandbox.settings import SandboxSettings
from mcp_analysis.session.analysis import AnalysisSession
from tests.conftest import SAMPLE_DOCUMENTS, make_settings
from tests.mcp_helpers import HttpServer

pytestmark = pytest.mark.anyio


async def test_host_function_cannot_wipe_a_session_or_stall_others(two_worker_http: HttpServer) -> None:
    """keep = 12345; quantiles(n=20M) is refused before it computes; keep is still 12345, others are answered."""
    async with two_worker_http.client(mode="legacy") as victim, two_worker_http.client(mode="legacy") as other:
        assert (await victim.call_tool("execute_code", {"code": "keep = 12345"})).structured_content["success"]
        latencies: list[float] = []
        done = anyio.Event()

        async def other_client() -> None:
            while not done.is_set():
                started = time.monotonic()
                listed = await other.call_tool("list_documents", {})
                latencies.append(time.monotonic() - started)
                assert listed.structured_content["total"] == SAMPLE_DOCUMENTS
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


async def test_heavy_allowed_host_work_does_not_stall_other_clients(two_worker_http: HttpServer) -> None:
    """statistics.* runs in monty's callback thread: while it works, other clients keep being answered.

    200,000 values keep the call busy for a while (CPython's statistics.mean sums exact
    fractions) yet far from the folder's 6 s code timeout on a slow machine; the bound on
    value counts is tested separately.
    """
    async with two_worker_http.client(mode="legacy") as heavy, two_worker_http.client(mode="legacy") as other:
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
                "execute_code", {"code": "import statistics\nstatistics.mean(list(range(200_000)))"}
            )
            done.set()
        assert result.structured_content["value"] == "99999.5", result.structured_content
        assert len(latencies) >= 3 and max(latencies) < 5, latencies


async def test_host_calls_are_bounded_by_the_session_limits(two_worker_http: HttpServer) -> None:
    async with two_worker_http.client(mode="legacy") as client:
        code = (
            "import statistics\nfrom pathlib import Path\nout = []\n"
            "for f in [lambda: statistics.mean([0] * 3_000_000),\n"
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
        assert still.structured_content["value"] == f"(3, {SAMPLE_DOCUMENTS - 10})"


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


async def test_statistics_refuse_numbers_beyond_a_float_range(sample_db: Path) -> None:
    # A multi-million-digit int would make statistics.pvariance hold the GIL in big-int arithmetic:
    # the server's event loop would stop for seconds, and the computation would go on after the
    # call timed out. Counting such an int as a few thousand values does not bound its cost, so
    # numbers beyond a float's range are refused. Building the 845,000-digit int below takes ~1 s
    # of sandbox time; the timeout leaves room for a slow machine.
    kb = await KnowledgeBase.open(make_settings(sample_db, sandbox={"code_timeout": 30.0}))
    async with AnalysisSession(kb) as session:
        assert (await session.execute("import statistics\nb = 7 ** 1_000_000\nkeep = 1")).success
        for call in ("statistics.pvariance([b, 1, 2])", "statistics.mean([1.5, {'x': [2 ** 1100]}])"):
            result = await session.execute(call)
            assert not result.success and not result.state_restored, result
            assert "ValueError: statistics." in (result.error or ""), result.error
            assert "at most 309 digits" in (result.error or "") and "float" in (result.error or ""), result.error
        fine = await session.execute(
            "statistics.median_high([2**1020, 2**1020, 1]) == 2**1020, statistics.mean([10**300, 0])"
        )
        assert fine.value == "(True, 5" + "0" * 299 + ")", fine.error
        assert (await session.execute("keep")).value == "1"
    await kb.close()


def test_host_call_bounds_are_exact() -> None:
    # docs/sandbox.md: "at most sandbox.max_memory_mb × 4,096 values per call", exactly. The argument
    # wrappers and the outer list are not counted (a list of exactly that many numbers passes), and the
    # pre-check and the result check agree (quantiles(n=max+1) is refused before it computes).
    bounds = HostBounds.of(SandboxSettings(max_memory_mb=16))
    most = bounds.max_values
    assert most == 16 * 4096
    bounds.check_arguments("statistics.mean", ([0] * most,), {})
    bounds.check_arguments("statistics.covariance", ([0] * (most // 2), [1] * (most // 2)), {})
    bounds.check_arguments("statistics.mode", ([[]] * most,), {})  # nested containers count
    bounds.check_result("statistics.quantiles", [0.0] * most)
    bounds.check_count("statistics.quantiles", most)
    for over in (([0] * (most + 1),), ([[]] * (most + 1),), ([0] * (most // 2), [1] * (most // 2 + 1))):
        with pytest.raises(HostLimitError, match=f"more than {most:,} values"):
            bounds.check_arguments("statistics.mean", over, {})
    with pytest.raises(HostLimitError):
        bounds.check_result("statistics.quantiles", [0.0] * (most + 1))
    with pytest.raises(HostLimitError):
        bounds.check_count("statistics.quantiles", most + 1)
