"""Context expansion reads each hit's own window of its document, not one range across documents."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mcp_analysis.search.expand import WINDOW, expand_hits
from mcp_analysis.search.hybrid import Hit
from mcp_analysis.store.database import Store
from mcp_analysis.store.models import ChunkRecord, DocumentMeta
from mcp_analysis.store.writes import DocumentRows

pytestmark = pytest.mark.anyio

ITEMS = 200  # one long section of paragraphs per document: windows bound the expansion


def _document(doc_id: str, hit_at: int) -> tuple[DocumentRows, ChunkRecord]:
    items = [
        {
            "document_id": doc_id,
            "position": p,
            "self_ref": f"#/texts/{p}",
            "label": "section_header" if p == 0 else "text",
            "text": f"{doc_id} item {p}",
            "page_numbers": [1],
            "heading_level": 1 if p == 0 else None,
            "picture_data": None,
            "chunk_ids": [],
        }
        for p in range(ITEMS)
    ]
    chunk = {
        "id": f"{doc_id}-chunk",
        "document_id": doc_id,
        "content": f"{doc_id} item {hit_at}",
        "content_fts": f"{doc_id} item {hit_at}",
        "metadata": json.dumps({"item_range": [hit_at, hit_at], "section_range": [0, ITEMS - 1], "labels": ["text"]}),
        "order": 0,
        "vector": [1.0, 0.0, 0.0, 0.0],
    }
    meta = DocumentMeta(
        id=doc_id,
        uri=f"file:///{doc_id}.md",
        title=doc_id,
        metadata={},
        created_at="2026-01-01T00:00:00+00:00",
        updated_at="2026-01-01T00:00:00+00:00",
        content_hash=doc_id,
        content_size=1,
    )
    rows = DocumentRows(meta, {"id": doc_id, "content": "", "docling_document": b""}, items, [chunk])
    return rows, ChunkRecord.from_row(chunk)


class _CountingReads:
    """The real store, with the item rows each read returned kept (what expansion read)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.read: list[dict[str, Any]] = []

    async def items(self, where: str, columns: Any = None) -> list[dict[str, Any]]:
        rows = await self.store.items(where, columns)
        self.read += rows
        return rows


async def test_expansion_reads_only_each_hits_window(tmp_path: Path) -> None:
    store = await Store.open(tmp_path / "kb.lancedb", create=True)
    await store.initialize("test", 4)
    early, early_chunk = _document("early", 0)  # window 0..WINDOW
    late, late_chunk = _document("late", 150)  # window 150-WINDOW..150+WINDOW
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
