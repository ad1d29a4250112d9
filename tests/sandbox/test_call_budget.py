"""Host calls and sleep are bounded per `execute_code` call (docs/sandbox.md "Limits"), not over a
session's life: a long analysis never runs out, and going over in one call keeps the variables."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic_monty import NOT_HANDLED

from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.sandbox.budget import RUNNING_AT_ONCE, CallBudget
from mcp_analysis.session.analysis import AnalysisSession
from tests.conftest import make_settings

READS = (
    "import os\nfirst = sorted(os.listdir('/documents'))[0]\n"
    "for i in range({n}):\n    open('/documents/' + first + '/metadata.json').read()\nkept = {n}"
)


@pytest.mark.anyio
async def test_calls_that_each_keep_to_the_host_call_limit_never_run_out(sample_db: Path, tmp_path: Path) -> None:
    settings = make_settings(sample_db, sandbox={"max_host_calls": 300}, sessions={"dir": tmp_path / "sessions"})
    kb = await KnowledgeBase.open(settings)
    async with AnalysisSession(kb) as session:
        for _ in range(4):  # ~200 host calls each (an open and a read per file): 800 in all, 300 allowed per call
            result = await session.execute(READS.format(n=100))
            assert result.success, result.error
        over = await session.execute(READS.format(n=200))
        assert not over.success and not over.state_restored
        assert "host call limit of 300 exceeded in this call" in (over.error or "")
        assert "sandbox.max_host_calls" in (over.error or "")
        assert (await session.execute("kept")).value == "100"  # the call before is kept
        unknown = await session.execute("not_defined_anywhere")
        assert "NameError" in (unknown.error or "") and "host call limit" not in (unknown.error or "")
        for _ in range(2):  # the host modules count too, per call
            assert (await session.execute("import statistics\nfor i in range(200):\n    statistics.mean([i])")).success
        over_module = await session.execute("for i in range(400):\n    statistics.mean([i])")
        assert "host call limit of 300 exceeded" in (over_module.error or "") and not over_module.state_restored
        flood = await session.execute("import asyncio\nawait asyncio.gather(*[search('x') for _ in range(400)])")
        assert "host call limit of 300 exceeded" in (flood.error or ""), flood.error
        # What the budget cannot count (failing name lookups) stays bounded by monty's count per worker.
        lookups = await session.execute(
            "n = 0\nfor i in range(100_000):\n    try:\n        nowhere\n    except NameError:\n        n += 1"
        )
        assert not lookups.success and lookups.state_restored and "sandbox.max_host_calls" in (lookups.error or "")
        assert (await session.execute("kept")).value == "100"
        assert (await session.execute("len(await list_documents())")).success
    await kb.close()


@pytest.mark.anyio
async def test_sleep_is_bounded_per_call_by_the_code_timeout(sample_db: Path, tmp_path: Path) -> None:
    settings = make_settings(sample_db, sandbox={"code_timeout": 2.0}, sessions={"dir": tmp_path / "sessions"})
    kb = await KnowledgeBase.open(settings)
    async with AnalysisSession(kb) as session:
        assert (await session.execute("keep = 7")).success
        for _ in range(3):  # 3.6 s slept in all: more than one call may, each call within it
            started = time.monotonic()
            result = await session.execute("import time\ntime.sleep(1.2)\n'awake'")
            assert result.success and result.value == "'awake'", result.error
            assert time.monotonic() - started >= 1.2  # slept in full, not cut short
        started = time.monotonic()
        over = await session.execute("import time\ntime.sleep(1.5)\ntime.sleep(1.5)")
        assert not over.success and "TimeoutError" in (over.error or "")
        assert "sandbox.code_timeout (2 s)" in (over.error or "") and "nothing was slept" in (over.error or "")
        assert time.monotonic() - started < 1.5 + 1.0  # refused before the second sleep, not waited out
        assert (await session.execute("keep")).value == "7"
    await kb.close()


def test_a_budget_counts_every_host_call_and_refuses_past_its_limit() -> None:
    budget = CallBudget(max_calls=3, max_sleep=1.0)
    seen: list[str] = []

    def handler(*, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], **_: Any) -> str:
        seen.append(name)
        return "handled"

    os_handler = budget.os(handler)
    assert os_handler(name="os.listdir", args=("/documents",), kwargs={}) == "handled"

    async def search(query: str) -> str:
        return query

    functions = budget.functions({"search": search, "answer": 42, "now": lambda: "sync"})
    assert functions["answer"] == 42  # values are not calls
    assert anyio.run(functions["search"], "q") == "q"
    assert functions["now"]() == "sync"  # a plain function stays plain: the sandbox must not await it
    assert budget.calls == 3 and seen == ["os.listdir"]
    refused = os_handler(name="os.listdir", args=("/documents",), kwargs={})
    with pytest.raises(RuntimeError, match="host call limit of 3 exceeded"):
        anyio.run(lambda: refused)
    with pytest.raises(RuntimeError, match="host call limit of 3 exceeded"):
        anyio.run(functions["search"], "q")
    with pytest.raises(RuntimeError, match="host call limit of 3 exceeded"):
        functions["now"]()
    refused_too = budget.os(None)(name="os.stat", args=(), kwargs={})
    with pytest.raises(RuntimeError, match="host call limit of 3 exceeded"):  # refused, not NOT_HANDLED
        anyio.run(lambda: refused_too)
    assert seen == ["os.listdir"]  # refused calls never reach the handler
    assert CallBudget(max_calls=3, max_sleep=1.0).os(None)(name="os.stat", args=(), kwargs={}) is NOT_HANDLED


@pytest.mark.parametrize(
    ("seconds", "error", "message"),
    [
        (-1, ValueError, "non-negative"),
        (float("nan"), TypeError, "number of seconds"),
        ("1", TypeError, "number of seconds"),
        (True, TypeError, "number of seconds"),
        (1.5, TimeoutError, "past sandbox.code_timeout"),
    ],
)
def test_a_sleep_the_budget_cannot_grant_is_refused_before_it_waits(
    seconds: Any, error: type[Exception], message: str
) -> None:
    budget = CallBudget(max_calls=10, max_sleep=1.0)
    with pytest.raises(error, match=message):
        anyio.run(lambda: budget.os(None)(name="time.sleep", args=(seconds,), kwargs={}))
    assert budget.slept == 0.0


def test_sleeps_add_up_within_one_call() -> None:
    budget = CallBudget(max_calls=10, max_sleep=0.1)
    sleep = budget.os(None)
    anyio.run(lambda: sleep(name="asyncio.sleep", args=(0.06,), kwargs={}, is_async=True))
    with pytest.raises(TimeoutError, match=r"to 0\.12 s"):
        anyio.run(lambda: sleep(name="time.sleep", args=(0.06,), kwargs={}))
    assert budget.slept == pytest.approx(0.06) and budget.calls == 2


def test_going_over_stops_the_host_calls_already_in_flight() -> None:
    budget = CallBudget(max_calls=2, max_sleep=1.0)

    async def slow() -> None:
        await anyio.sleep(30)

    call = budget.functions({"slow": slow})["slow"]

    async def flood() -> tuple[list[str], float]:
        errors: list[str] = []

        async def one() -> None:
            try:
                await call()
            except RuntimeError as exc:
                errors.append(str(exc))

        started = time.monotonic()
        async with anyio.create_task_group() as group:
            group.start_soon(one)
            group.start_soon(one)
            await anyio.sleep(0.05)  # both in flight
            group.start_soon(one)  # the third is over the budget
        return errors, time.monotonic() - started

    errors, took = anyio.run(flood)
    assert len(errors) == 3 and all("host call limit of 2 exceeded" in e for e in errors), errors
    assert took < 5  # the two waiting 30 s were stopped


def test_gathered_host_calls_run_a_few_at_a_time() -> None:
    budget = CallBudget(max_calls=200, max_sleep=1.0)
    running, most = 0, 0

    async def search() -> None:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await anyio.sleep(0.01)
        running -= 1

    call = budget.functions({"search": search})["search"]

    async def gather() -> None:
        async with anyio.create_task_group() as group:
            for _ in range(100):
                group.start_soon(call)

    anyio.run(gather)
    assert most == RUNNING_AT_ONCE and budget.calls == 100
