"""A server's knowledge base sees its own watcher's commits at once (another handle in the same process)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from mcp_analysis.config import Settings
from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.ingest.pipeline import Ingestor
from tests.conftest import make_settings

pytestmark = pytest.mark.anyio

UNTITLED = "the harbour master approved the night pilotage of the grain carrier at berth nine\n"
TITLED = "# Tug Roster\n\nThree tugs stand by for the tanker on Tuesday.\n"


async def test_a_commit_through_another_handle_is_read_at_once_when_asked(tmp_path: Path) -> None:
    """The server's knowledge base after its watcher (another handle in the same process) committed:
    `refresh(latest=True)` reads the new version now, not after LanceDB's read-consistency interval."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "pilotage.txt").write_text(UNTITLED)
    writer = await KnowledgeBase.open(make_settings(tmp_path / "kb.lancedb"), create=True)
    await Ingestor(writer).add([docs])
    # A reader whose tables never refresh on their own: only an explicit read of the latest version shows a commit.
    reader = await KnowledgeBase.open(make_settings(tmp_path / "kb.lancedb"), read_consistency=None)
    assert len(await reader.corpus().documents()) == 1
    (docs / "tugs.md").write_text(TITLED)
    await Ingestor(writer).add([docs / "tugs.md"])
    await reader.refresh()
    assert len(await reader.corpus().documents()) == 1  # still the version it had
    await reader.refresh(latest=True)
    assert {d.title for d in await reader.corpus().documents()} == {"pilotage", "Tug Roster"}
    hits = await reader.corpus().search("tugs stand by for the tanker", limit=1)
    assert hits and hits[0].document_title == "Tug Roster"  # the chunks too, not only the document list


async def test_the_server_reads_the_latest_version_as_soon_as_its_watcher_committed(
    sample_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcp.server.subscriptions import InMemorySubscriptionBus

    from mcp_analysis.server.runtime import Runtime

    asked: list[bool] = []
    latest_read = anyio.Event()
    real_refresh = KnowledgeBase.refresh

    async def recording_refresh(self: KnowledgeBase, *, latest: bool = False) -> int:
        asked.append(latest)
        version = await real_refresh(self, latest=latest)
        if latest:
            latest_read.set()
        return version

    monkeypatch.setattr(KnowledgeBase, "refresh", recording_refresh)
    runtime = Runtime(sample_settings, InMemorySubscriptionBus())
    async with runtime.use():
        await runtime.ready()
        await anyio.sleep(0.3)
        assert asked and not any(asked)  # its own checks follow LanceDB's interval
        runtime.documents_changed()  # what the folder watcher calls after a commit
        with anyio.fail_after(sample_settings.server.watch_interval):  # at once, not at the next interval
            await latest_read.wait()
