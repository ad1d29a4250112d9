"""The order the suite's modules start in (tests/schedule.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.schedule import LONGEST_FIRST, pytest_collection_modifyitems

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
