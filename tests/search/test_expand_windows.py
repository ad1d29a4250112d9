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
