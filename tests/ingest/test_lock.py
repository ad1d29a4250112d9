"""The ingest lock is awaited without blocking the event loop, and a cancelled wait holds nothing."""

from __future__ import annotations

import fcntl
from pathlib import Path

import anyio
import pytest

from mcp_analysis.ingest.lock import LOCK_FILE, ingest_lock

pytestmark = pytest.mark.anyio


def _hold(db: Path) -> object:
    """Take the lock through a separate open file, as another process's `add` would."""
    handle = open(db / LOCK_FILE, "a+")  # noqa: SIM115 - closed by the caller
    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return handle


def _free(db: Path) -> bool:
    with open(db / LOCK_FILE, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(handle, fcntl.LOCK_UN)
        return True


async def test_waiting_for_the_lock_keeps_the_event_loop_serving(tmp_path: Path) -> None:
    holder = _hold(tmp_path)
    ticks = 0
    entered = anyio.Event()

    async def waiter() -> None:
        async with ingest_lock(str(tmp_path)):
            entered.set()
            assert not _free(tmp_path)  # held by us now

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter)
        for _ in range(10):  # other work of the server goes on while the waiter waits
            await anyio.sleep(0.05)
            ticks += 1
        assert ticks == 10 and not entered.is_set()
        holder.close()  # the other writer finishes
        with anyio.fail_after(10):
            await entered.wait()
    assert _free(tmp_path)  # released on exit


async def test_a_cancelled_wait_leaves_the_lock_free(tmp_path: Path) -> None:
    holder = _hold(tmp_path)
    with anyio.move_on_after(0.5) as scope:
        async with ingest_lock(str(tmp_path)):
            pytest.fail("entered a lock another writer holds")
    assert scope.cancelled_caught
    holder.close()
    assert _free(tmp_path)  # nobody left behind holding or about to take it


async def test_object_store_paths_take_no_lock() -> None:
    entered = False
    async with ingest_lock("s3://bucket/kb.lancedb"):  # opening a lock file there would raise
        entered = True
    assert entered
