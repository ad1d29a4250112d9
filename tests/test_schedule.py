"""The order the suite's modules start in (tests/schedule.py)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from tests import schedule
from tests.schedule import LONGEST_FIRST, Timeline, pytest_collection_modifyitems

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


def test_the_timeline_sums_each_module_and_each_process_longest_first() -> None:
    timeline = Timeline()
    for nodeid, worker, seconds in [
        ("tests/a.py::x", "gw0", 1.0),
        ("tests/b.py::y", "gw1", 2.5),
        ("tests/a.py::z", "gw0", 2.0),
        ("tests/c.py::w", None, 0.5),  # no xdist: the main process
    ]:
        node = SimpleNamespace(gateway=SimpleNamespace(id=worker)) if worker else None
        timeline.add(SimpleNamespace(nodeid=nodeid, duration=seconds, node=node))  # type: ignore[arg-type]
    lines = timeline.lines(shown=2)
    assert [line.split()[1] for line in lines[:2]] == ["tests/a.py", "tests/b.py"]  # 3.0 s, 2.5 s; c.py not shown
    assert lines[0].startswith("     3.0s") and len(lines) == 5
    assert [line.split(":")[0] for line in lines[2:]] == ["gw0", "gw1", "main"]
    assert "its tests took 3.0s" in lines[2] and "its tests took 0.5s" in lines[4]


@pytest.mark.parametrize(
    ("cores", "markexpr", "expected"),
    [
        (2, "", 3),
        (2, "not slow", 2),
        (2, "not  slow and not service", 2),
        (2, "slow", 3),
        (4, "sample_kb", 5),
        (1, "", 2),
    ],
)
def test_a_run_with_slow_tests_gets_a_process_more_than_the_cores_and_the_fast_tier_the_cores(
    cores: int, markexpr: str, expected: int
) -> None:
    assert schedule.processes(cores, markexpr) == expected


def test_auto_counts_the_cores_this_process_may_use_and_yields_to_xdists_own_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.conftest import pytest_xdist_auto_num_workers

    config = SimpleNamespace(getoption=lambda name: {"markexpr": "not slow"}[name])
    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS", raising=False)
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1, 2, 3})
    assert pytest_xdist_auto_num_workers(config) == 4  # type: ignore[arg-type]
    config = SimpleNamespace(getoption=lambda name: {"markexpr": ""}[name])
    assert pytest_xdist_auto_num_workers(config) == 5  # type: ignore[arg-type]
    monkeypatch.setenv("PYTEST_XDIST_AUTO_NUM_WORKERS", "7")
    assert pytest_xdist_auto_num_workers(config) is None  # type: ignore[arg-type]
