"""A server's knowledge base sees its own watcher's commits at once (another handle in the same process)."""

from __future__ import annotations

from pathlib import Path

import pytest

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
