"""The GIL changes hands quickly while the server starts its search stack in threads, and the
process's switch interval is back as it was once the start is over."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp.server.subscriptions import InMemorySubscriptionBus

from mcp_analysis.config import load_settings
from mcp_analysis.gil_handoff import STARTING_INTERVAL_S, quick_handoff
from mcp_analysis.server import runtime as runtime_module
from mcp_analysis.server.runtime import Runtime


@pytest.fixture
def interval() -> Iterator[float]:
    before = sys.getswitchinterval()
    sys.setswitchinterval(0.005)
    yield 0.005
    sys.setswitchinterval(before)


def test_the_interval_is_short_inside_and_restored_after(interval: float) -> None:
    with quick_handoff():
        assert sys.getswitchinterval() == pytest.approx(STARTING_INTERVAL_S)
    assert sys.getswitchinterval() == pytest.approx(interval)
    with pytest.raises(RuntimeError), quick_handoff():
        raise RuntimeError("a start that fails")
    assert sys.getswitchinterval() == pytest.approx(interval)


def test_overlapping_phases_restore_only_when_the_last_ends(interval: float) -> None:
    first, second = quick_handoff(), quick_handoff()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert sys.getswitchinterval() == pytest.approx(STARTING_INTERVAL_S)
    second.__exit__(None, None, None)
    assert sys.getswitchinterval() == pytest.approx(interval)


def test_a_shorter_interval_set_by_the_program_is_kept(interval: float) -> None:
    sys.setswitchinterval(0.0001)
    shorter = sys.getswitchinterval()  # CPython keeps whole microseconds
    with quick_handoff():
        assert sys.getswitchinterval() == shorter
    assert sys.getswitchinterval() == shorter


@pytest.mark.anyio
async def test_the_runtime_start_runs_with_the_short_interval(
    sample_db: Path, interval: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, float] = {}
    real_import = importlib.import_module

    def import_module(name: str, package: str | None = None) -> Any:
        seen.setdefault("imports", sys.getswitchinterval())
        return real_import(name, package)

    real_load = Runtime._load_search

    async def load_search(self: Runtime, kb: Any) -> None:
        seen["warm-up"] = sys.getswitchinterval()
        await real_load(self, kb)

    monkeypatch.setattr(runtime_module.importlib, "import_module", import_module)
    monkeypatch.setattr(Runtime, "_load_search", load_search)
    runtime = Runtime(load_settings(db=sample_db), InMemorySubscriptionBus())
    async with runtime.use():
        await runtime.ready()
        await runtime.warmed.wait()
        assert runtime.warm_up_error is None
        assert seen == {"imports": pytest.approx(STARTING_INTERVAL_S), "warm-up": pytest.approx(STARTING_INTERVAL_S)}
        assert sys.getswitchinterval() == pytest.approx(interval)  # back once the start is over
