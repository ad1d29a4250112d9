"""Conversion workers kept across adds (as a folder watcher keeps them), and replaced past a bound."""

from __future__ import annotations

import hashlib
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


def _maps(pid: int) -> str:
    """The files a live process has mapped (the parsers' native libraries among them once imported)."""
    return Path(f"/proc/{pid}/maps").read_text()


async def test_an_add_that_finds_every_file_unchanged_never_imports_the_parsers(tmp_path: Path) -> None:
    """A worker reads and hashes; only a file to convert makes it import the parsers (pdfium's library
    among them): a `sync` or `add` again over an unchanged folder never pays for them."""
    doc = tmp_path / "a.md"
    doc.write_text("# Alpha\n\nThe first version of the text.\n")
    kb = await KnowledgeBase.open(make_settings(tmp_path / "kb.lancedb"), create=True)
    pool = ConversionPool(Limits(), chunk_tokens=256)
    try:
        assert len((await Ingestor(kb).add([doc])).added) == 1

        report = await Ingestor(kb, pool=pool).add([doc])
        assert len(report.unchanged) == 1 and not report.added and not report.replaced
        (pid,) = pool.pids()
        assert "libpdfium" not in _maps(pid)

        doc.write_text("# Alpha\n\nThe second version, with other words.\n")
        report = await Ingestor(kb, pool=pool).add([doc])
        assert len(report.replaced) == 1
        assert pool.pids() == [pid] and "libpdfium" in _maps(pid)
        (stored,) = await kb.store.all_meta()
        assert stored.content_hash == hashlib.sha256(doc.read_bytes()).hexdigest()
    finally:
        pool.close()
        await kb.close()


async def test_a_worker_asked_to_warm_has_its_parsers_before_its_first_read(tmp_path: Path) -> None:
    """`warm` (sent when every file will be converted: a new knowledge base) is answered before the
    read that follows it, and the read still returns the file's hash."""
    doc = tmp_path / "a.md"
    doc.write_text("# Alpha\n\nText.\n")
    pool = ConversionPool(Limits(), chunk_tokens=256)
    try:
        pool.start()
        pool.warm()
        with pool.worker() as worker:
            read = worker.read(str(doc), doc.name)
            assert "libpdfium" in _maps(worker.process.pid)
            assert read.size == doc.stat().st_size
            assert worker.convert().title == "Alpha"
    finally:
        pool.close()
