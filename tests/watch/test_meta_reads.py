"""A watched folder's batch of changes reads the document list once, however many kinds of change it holds.

The add reads `document_meta` under its lock and hands the mirror what it read, its own
writes applied; the mirror finds the deleted files' documents in that. A real knowledge base
on disk and real conversion workers; the store's own read is counted, not replaced.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.ingest.files import file_uri
from mcp_analysis.watch.mirror import FolderMirror
from mcp_analysis.watch.rules import FileRules
from tests.conftest import make_settings

pytestmark = pytest.mark.anyio


def counted(read: Callable[..., Awaitable[Any]], calls: list[int]) -> Callable[..., Awaitable[Any]]:
    """`read` (`Store.all_meta`), run as it is, each read of the whole list noted in `calls` (a read
    narrowed by a filter, such as a write's of the uris it replaces, grows with the change, not the list)."""

    async def run(where: str | None = None) -> Any:
        if where is None:
            calls.append(1)
        return await read(where)

    return run


async def test_one_batch_reads_the_document_list_once(tmp_path: Path) -> None:
    folder = tmp_path / "watched"
    folder.mkdir()
    for name in ("agenda", "berths", "cargo", "dredging"):
        (folder / f"{name}.md").write_text(f"# {name.title()}\n\nThe {name} note of the harbour office.\n")
    kb = await KnowledgeBase.open(make_settings(tmp_path / "kb.lancedb"), create=True)
    mirror = FolderMirror(kb, [folder], FileRules())
    try:
        await mirror.sync()
        before = {Path(d.uri).name: d for d in await kb.corpus().documents()}
        reads: list[int] = []
        kb.store.all_meta = counted(kb.store.all_meta, reads)  # type: ignore[method-assign]

        (folder / "agenda.md").write_text("# Agenda\n\nRevised: the pilots meet on Thursday.\n")  # replaced
        (folder / "berths.md").rename(folder / "berth-plan.md")  # moved: the same document
        (folder / "cargo.md").unlink()  # removed
        report = await mirror.apply([folder])
        assert len(reads) == 1, f"{len(reads)} reads of document_meta for one batch"
        assert report.replaced == [file_uri(folder / "agenda.md")] and report.removed == [file_uri(folder / "cargo.md")]
        assert report.moved == [(file_uri(folder / "berths.md"), file_uri(folder / "berth-plan.md"))]

        (folder / "dredging.md").unlink()  # a batch of deletions only: the mirror's own read
        assert (await mirror.apply([folder / "dredging.md"])).removed == [file_uri(folder / "dredging.md")]
        assert len(reads) == 2
    finally:
        mirror.close()
    after = {Path(d.uri).name: d for d in await kb.corpus().documents()}
    assert sorted(after) == ["agenda.md", "berth-plan.md"]
    assert after["berth-plan.md"].id == before["berths.md"].id  # the moved document was not taken for a deleted one
    assert after["agenda.md"].id != before["agenda.md"].id
