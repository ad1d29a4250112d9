"""Conversion workers kept across adds (as a folder watcher keeps them), and replaced past a bound."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest

from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.ingest.limits import Limits
from mcp_analysis.ingest.pipeline import Ingestor
from mcp_analysis.ingest.pool import ConversionPool
from tests.conftest import make_settings
from tests.ingest import hostile_files as hostile

pytestmark = pytest.mark.anyio


async def test_one_pool_serves_several_adds_and_replaces_a_worker_killed_at_a_bound(tmp_path: Path) -> None:
    first = tmp_path / "first.md"
    first.write_text(hostile.GOOD_TEXT)
    slow = hostile.nested_html(tmp_path / "slow.html", 50_000)
    second = tmp_path / "second.md"
    second.write_text("# Second\n\nAdded by a fresh worker.\n")
    pool = ConversionPool(Limits(max_seconds=5, max_depth=100_000), chunk_tokens=256)
    kb = await KnowledgeBase.open(make_settings(tmp_path / "kb.lancedb"), create=True)
    try:
        ingestor = Ingestor(kb, pool=pool)
        assert len((await ingestor.add([first])).added) == 1
        (worker,) = pool.pids()
        assert pool.started == 1

        report = await ingestor.add([slow])
        assert "reached the limit of 5 s per file" in report.skipped[0][1]
        assert not psutil.pid_exists(worker) or psutil.Process(worker).status() == psutil.STATUS_ZOMBIE
        assert pool.pids() == []

        assert len((await ingestor.add([second])).added) == 1
        assert pool.started == 2 and len(pool.pids()) == 1
        assert await kb.corpus().count() == 2
    finally:
        live = pool.pids()
        pool.close()
        await kb.close()
    assert live and not any(psutil.pid_exists(pid) and psutil.Process(pid).is_running() for pid in live)
