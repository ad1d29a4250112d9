"""The watcher keeps its conversion worker up between changes, and ends it once they stop."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import anyio
import psutil
import pytest

from mcp_analysis.config import load_settings
from mcp_analysis.ingest.pool import ConversionPool
from mcp_analysis.watch.follow import FolderWatcher
from mcp_analysis.watch.run import close_mirror, open_mirror
from tests.conftest import make_settings

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(600)]

KEEP_SECONDS = 3.0


async def _until(condition: Callable[[], object], what: str, seconds: float = 240) -> None:
    """Poll `condition` until it is true; fail with `what` at the deadline."""
    try:
        with anyio.fail_after(seconds):
            while True:
                if condition():
                    return
                await anyio.sleep(0.1)
    except TimeoutError:
        raise AssertionError(f"not within {seconds:g} s: {what}") from None


async def test_a_change_soon_after_another_uses_the_same_worker_and_idle_ends_it(tmp_path: Path) -> None:
    folder = tmp_path / "folder"
    folder.mkdir()
    # The worker is kept KEEP_SECONDS once the tables are compacted, after `optimize_idle_seconds` (10 s by default).
    watch = {
        "settle_seconds": 0.2,
        "debounce_seconds": 0.1,
        "keep_worker_seconds": KEEP_SECONDS,
        "optimize_idle_seconds": 0.5,
    }
    settings = make_settings(tmp_path / "kb.lancedb", watch=watch)
    mirror = await open_mirror(settings, [folder])
    seen: list[str] = []

    def changed() -> None:
        seen.append("change")

    async def documents() -> set[str]:
        return {Path(m.uri).name for m in await mirror.kb.store.all_meta()}

    try:
        async with anyio.create_task_group() as tg:
            await tg.start(FolderWatcher(mirror, settings.watch, changed).run)
            (folder / "one.md").write_text("# One\n\nThe kittiwake nests on the cliff.\n")
            await _until(lambda: len(seen) >= 1, "the first change applied")
            [worker] = mirror.pool.pids()
            assert psutil.pid_exists(worker)
            # Once the tables are compacted the watcher is idle: only keep_worker_seconds keeps the worker.
            await _until(lambda: not mirror.uncompacted, "the tables compacted after the first change")
            (folder / "two.md").write_text("# Two\n\nThe gannet dives for fish.\n")
            await _until(lambda: len(seen) >= 2, "the second change applied")
            assert await documents() == {"one.md", "two.md"}
            assert mirror.pool.started == 1 and mirror.pool.pids() == [worker]  # read by the worker kept up

            await _until(lambda: not mirror.pool.pids(), "the idle worker ended", seconds=KEEP_SECONDS + 60)
            await _until(lambda: not psutil.pid_exists(worker), "the ended worker reaped", seconds=10)

            (folder / "three.md").write_text("# Three\n\nThe puffin carries sand eels.\n")
            await _until(lambda: len(seen) >= 3, "a change after the worker ended")
            assert await documents() == {"one.md", "two.md", "three.md"}
            assert mirror.pool.started == 2  # a new worker for it
            tg.cancel_scope.cancel()
    finally:
        await close_mirror(mirror)
    assert not mirror.pool.pids()


def test_released_workers_end_and_the_pool_starts_new_ones() -> None:
    settings = load_settings()
    pool = ConversionPool(settings.ingest.limits(), settings.ingest.chunk_tokens)
    try:
        with pool.worker() as worker:
            first = worker.process
        assert pool.release_idle() == 1
        assert pool.pids() == [] and first.poll() is not None  # ended and reaped
        with pool.worker() as worker:  # still open: a new worker on demand
            assert worker.alive and worker.process.pid != first.pid
        assert pool.started == 2
    finally:
        pool.close()
