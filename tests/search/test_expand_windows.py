"""Context expansion reads each hit's own window of its document, not one range across documents."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mcp_analysis.search.expand import WINDOW, expand_hits
from mcp_analysis.search.hybrid import Hit
from mcp_analysis.store.database import Store
from mcp_analysis.store.models import ChunkRecord
from tests.search.long_sections import document_rows, item_row, rows_of

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


def _second_hit(doc_id: str, at: int) -> Hit:
    """A hit on another chunk of `doc_id` (its item `at`), outside the first hit's window."""
    _, chunk = document_rows(doc_id, at)
    return Hit(chunk.model_copy(update={"id": f"{doc_id}-chunk-{at}"}), 0.1)


@pytest.mark.parametrize("separate", [True, False])
async def test_expansion_reads_only_the_documents_the_first_results_can_hold(tmp_path: Path, separate: bool) -> None:
    """Results come in the order of their first hit and each document makes at least one, so with
    `limit` 2 only the first two documents' hits can be in them: the others' windows are not read,
    and the two results are those a search for more results starts with."""
    store = await Store.open(tmp_path / "kb.lancedb", create=True)
    await store.initialize("test", 4)
    written = {name: document_rows(name, 100) for name in ("a", "b", "c", "d")}
    await store.write_documents([rows for rows, _ in written.values()])
    metas = {name: rows.meta for name, (rows, _) in written.items()}
    hits = [Hit(written[name][1], 1.0 - i / 10) for i, name in enumerate("abc")]
    hits += [_second_hit("a", 10), Hit(written["d"][1], 0.2)]
    found = {}
    for limit in (2, 5):
        reads = _CountingReads(store)
        results = await expand_hits(
            reads,  # type: ignore[arg-type]
            hits,
            metas.get,
            max_chars=100_000,
            limit=limit,
            evidence=hits[3:],
            separate=separate,
        )
        found[limit] = ({r["document_id"] for r in reads.read}, [r.model_dump() for r in results])
    store.close()
    assert found[2][0] == {"a", "b"}  # c and d come after two documents: never in the first two results
    assert found[5][0] == {"a", "b", "c", "d"}
    assert found[2][1] == found[5][1][:2]
    assert [r["document_id"] for r in found[2][1]] == ["a", "b"]


@pytest.mark.parametrize("separate", [True, False])
async def test_a_passage_never_ends_with_the_next_sections_title(tmp_path: Path, separate: bool) -> None:
    """A workbook's sheet after the hit's: the passage grows over the next sheet's title, but its table is
    too big to follow, so the title would end the passage as a bare heading (a search for "revenue by
    region" ended with "## Support tickets"). One that its section's text follows stays."""
    store = await Store.open(tmp_path / "kb.lancedb", create=True)
    await store.initialize("test", 4)
    texts = [(1, "Revenue by region"), (None, "Norway 20.8 M, Denmark 12.4 M."), (1, "Support tickets")]
    texts += [(None, "ticket " * 400)]
    items = [item_row("book", p, level, text) for p, (level, text) in enumerate(texts)]
    chunk = {
        "id": "book-chunk",
        "document_id": "book",
        "content": "Norway 20.8 M, Denmark 12.4 M.",
        "content_fts": "Norway 20.8 M, Denmark 12.4 M.",
        "metadata": '{"item_range": [0, 1], "section_range": [0, 3], "labels": ["section_header", "text"]}',
        "order": 0,
        "vector": [1.0, 0.0, 0.0, 0.0],
    }
    rows = rows_of("book", items, [chunk])
    await store.write_documents([rows])
    hit, metas = Hit(ChunkRecord.from_row(chunk), 1.0), {"book": rows.meta}
    for max_chars, ends in ((500, "Denmark 12.4 M."), (5_000, "ticket ticket")):
        found = await expand_hits(store, [hit], metas.get, max_chars=max_chars, limit=1, separate=separate)
        assert len(found) == 1 and found[0].content.rstrip().endswith(ends), found[0].content[-80:]
        assert found[0].content.startswith("## Revenue by region\n\nNorway")
    store.close()
