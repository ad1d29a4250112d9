"""A change the watcher could not apply as a whole is tried again, without waiting for another event."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_analysis.watch import follow
from mcp_analysis.watch.follow import FolderWatcher
from mcp_analysis.watch.run import close_mirror, open_mirror
from tests.conftest import make_settings

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(600)]


async def test_a_failed_apply_is_retried_until_it_lands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(follow, "RETRY_FIRST_SECONDS", 0.2)
    folder = tmp_path / "folder"
    folder.mkdir()
    settings = make_settings(tmp_path / "kb.lancedb", watch={"settle_seconds": 0.2, "debounce_seconds": 0.1})
    mirror = await open_mirror(settings, [folder])
    real_apply = mirror.apply
    calls: list[list[Path]] = []

    async def flaky_apply(paths: Any) -> Any:  # the first change meets an unreachable store
        paths = list(paths)
        calls.append(paths)
        if len(calls) == 2:
            raise OSError("the store cannot be reached")
        return await real_apply(paths)

    monkeypatch.setattr(mirror, "apply", flaky_apply)
    changed = anyio.Event()
    watcher = FolderWatcher(mirror, settings.watch, on_change=changed.set)
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(watcher.run)  # call 1: the start-up mirror of the empty folder
            (folder / "note.md").write_text("# Note\n\nThe kittiwake nests on the cliff.\n")
            with anyio.fail_after(240):
                await changed.wait()
            tg.cancel_scope.cancel()
        assert len(calls) >= 3 and calls[1] == calls[2]  # failed once, the same paths tried again
        names = [Path(m.uri).name for m in await mirror.kb.store.all_meta()]
        assert names == ["note.md"]
    finally:
        await close_mirror(mirror)
