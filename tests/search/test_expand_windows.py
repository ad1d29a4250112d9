"""Context expansion reads each hit's own window of its document, not one range across documents."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mcp_analysis.search.expand import WINDOW, expand_hits
from mcp_analysis.search.hybrid import Hit
from mcp_analysis.store.database import Store
from tests.search.long_sections import document_rows

pytestmark = pytest.mark.anyio


class _CountingReads:
    """The real store, with the item rows each read returned kept (what expansion read)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.read: list[dict[str, Any]] = []

    async def item_windows(self, windows: Any, columns: Any = None) -> list[dict[str, Any]]:
        rows = await self.store.item_windows(windows, columns)
        self.read += rows
        return rows


async def test_expansion_reads_only_each_hits_window(tmp_path: Path) -> None:
    store = await Store.open(tmp_path / "kb.lancedb", create=True)
    await store.initialize("test", 4)
    early, early_chunk = document_rows("early", 0)  # window 0..WINDOW
    late, late_chunk = document_rows("late", 150)  # window 150-WINDOW..150+WINDOW
    await store.write_documents([early, late])
    metas = {"early": early.meta, "late": late.meta}
    reads = _CountingReads(store)
    results = await expand_hits(
        reads,  # type: ignore[arg-type]
        [Hit(early_chunk, 1.0), Hit(late_chunk, 0.5)],
        metas.get,
        max_chars=100_000,
        limit=2,
        separate=True,
    )
    store.close()
    read = {(r["document_id"], int(r["position"])) for r in reads.read}
    wanted = {("early", p) for p in range(WINDOW + 1)} | {("late", p) for p in range(150 - WINDOW, 150 + WINDOW + 1)}
    assert read == wanted  # one position range across both documents would read early's 0..190 too
    assert [r.document_id for r in results] == ["early", "late"]
    assert "early item 40" in results[0].content and "early item 41" not in results[0].content
    assert "late item 110" in results[1].content and "late item 109" not in results[1].content
