"""One watcher per knowledge base: the second is refused clearly, the first's exit frees the place."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_analysis.config import Settings
from mcp_analysis.watch.lock import WatcherRefused, watcher_lock
from tests.conftest import make_settings
from tests.services import redis

pytestmark = pytest.mark.anyio

SECRET = "a-secret-of-32-characters-or-more-0123"


async def test_a_local_knowledge_base_has_one_watcher_at_a_time(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "kb.lancedb")
    async with watcher_lock(settings):
        assert "pid " in (tmp_path / "kb.lancedb" / ".watch.lock").read_text()  # who holds it, for the message
        with pytest.raises(WatcherRefused, match=r"Another process already watches folders into .*\(pid \d+ on "):
            async with watcher_lock(settings):
                pytest.fail("a second watcher got the lock")
    async with watcher_lock(settings):  # released on exit
        pass


async def test_an_object_store_knowledge_base_is_guarded_by_a_redis_lease(tmp_path: Path) -> None:
    with redis(tmp_path) as port:
        settings = Settings(
            db="s3://bucket/kb",
            sessions={"store": f"redis://127.0.0.1:{port}/0", "secret": SECRET},
        )
        other_kb = settings.model_copy(update={"db": "s3://bucket/other"})
        async with watcher_lock(settings):
            with pytest.raises(WatcherRefused, match=r"s3://bucket/kb \(pid \d+ on "):
                async with watcher_lock(settings):
                    pytest.fail("a second watcher got the lease")
            async with watcher_lock(other_kb):  # another knowledge base is another lease
                pass
        async with watcher_lock(settings):  # released on exit
            pass
