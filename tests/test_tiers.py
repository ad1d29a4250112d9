"""The fast tier stays pure: the guard refuses processes and servers outside `slow`, and the
lists that mark `slow` name only modules and tests that exist."""

from __future__ import annotations

import ast
import contextlib
import multiprocessing
import multiprocessing.process
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.tiers import SERVICE_TESTS, SLOW_MODULES, SLOW_TESTS, SpawnInFastTier, children, refuse_spawning

REPO = Path(__file__).resolve().parent.parent


def test_a_subprocess_is_refused_and_recorded_even_when_the_code_catches_it() -> None:
    with refuse_spawning("t") as seen:
        with pytest.raises(SpawnInFastTier, match="not marked slow"):
            subprocess.run(["true"], check=False)
        with contextlib.suppress(Exception):  # the code under test may swallow it: the record stays
            subprocess.Popen(["true"])
    assert seen == ["Popen._execute_child", "Popen._execute_child"]


def test_multiprocessing_and_listening_are_refused() -> None:
    with refuse_spawning("t") as seen:
        with pytest.raises(SpawnInFastTier):
            multiprocessing.get_context("spawn").Process(target=print).start()
        with socket.socket() as sock, pytest.raises(SpawnInFastTier):
            sock.bind(("127.0.0.1", 0))
            sock.listen()
    assert seen == ["BaseProcess.start", "socket.listen"]


def test_the_guard_puts_back_what_it_replaced() -> None:
    before = (subprocess.Popen.__dict__["_execute_child"], multiprocessing.process.BaseProcess.start)
    with refuse_spawning("t"):
        assert subprocess.Popen.__dict__["_execute_child"] is not before[0]
    assert (subprocess.Popen.__dict__["_execute_child"], multiprocessing.process.BaseProcess.start) == before


def _test_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


def test_every_listed_module_and_test_exists() -> None:
    missing = [m for m in SLOW_MODULES if not (REPO / m).is_file()]
    missing += [
        f"{module}::{name}"
        for module, names in SLOW_TESTS.items()
        for name in sorted(names - _test_names(REPO / module) if (REPO / module).is_file() else names)
    ]
    missing += [t for t in SERVICE_TESTS if t.split("::")[-1] not in SLOW_TESTS.get(t.split("::")[0], ())]
    assert missing == []


def test_a_live_child_process_is_seen() -> None:
    """Slow itself (tests/tiers.py lists it): it starts one, as native code would, and sees it."""
    process = subprocess.Popen(["sleep", "30"])
    try:
        assert process.pid in children()
    finally:
        process.kill()
        process.wait()
    assert process.pid not in children()


@pytest.mark.parametrize(
    ("expression", "ignored"),
    [("not slow", True), ("not slow and not service", True), ("", None), ("slow", None), ("service", None)],
)
def test_the_ray_module_is_left_out_only_where_its_tests_are_deselected_and_ray_is_missing(
    monkeypatch: pytest.MonkeyPatch, expression: str, ignored: bool | None
) -> None:
    import importlib.util
    from types import SimpleNamespace

    from tests.tiers import RAY_TESTS, pytest_ignore_collect

    config: Any = SimpleNamespace(option=SimpleNamespace(markexpr=expression))
    assert pytest_ignore_collect(RAY_TESTS.parent / "test_pool.py", config) is None  # another path: not ours
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a))
    assert pytest_ignore_collect(RAY_TESTS, config) is ignored
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: SimpleNamespace())  # Ray installed
    assert pytest_ignore_collect(RAY_TESTS, config) is None
