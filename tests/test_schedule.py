"""The order the suite's modules start in (tests/schedule.py)."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.schedule import LONGEST_FIRST, pytest_collection_modifyitems, pytest_xdist_auto_num_workers

REPO = Path(__file__).resolve().parent.parent


def test_every_listed_module_exists_once() -> None:
    assert [m for m in LONGEST_FIRST if not (REPO / m).is_file()] == []
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)


def test_the_listed_modules_go_first_and_every_module_keeps_its_own_order() -> None:
    first, second = LONGEST_FIRST[:2]

    class Item:
        def __init__(self, nodeid: str) -> None:
            self.nodeid = nodeid

    collected = [Item(n) for n in ("tests/a.py::x", f"{second}::y", "tests/a.py::z", f"{first}::w", f"{second}::v")]
    items: list[pytest.Item] = collected  # type: ignore[assignment]
    pytest_collection_modifyitems(items)
    expected = [f"{first}::w", f"{second}::y", f"{second}::v", "tests/a.py::x", "tests/a.py::z"]
    assert [i.nodeid for i in items] == expected


def test_the_fast_tier_runs_a_process_per_core_and_a_whole_run_more(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS", raising=False)
    cores = len(os.sched_getaffinity(0))

    def workers(markexpr: str) -> Any:
        return pytest_xdist_auto_num_workers(SimpleNamespace(option=SimpleNamespace(markexpr=markexpr)))  # type: ignore[arg-type]

    assert workers("not slow") == cores
    assert workers("") > cores and workers("slow") == workers("")
    monkeypatch.setenv("PYTEST_XDIST_AUTO_NUM_WORKERS", "5")
    assert workers("") is None  # xdist's own hook reads it
