"""Rows written as Lance fragments elsewhere (a Ray ingest's workers) and committed by the store:
real LanceDB and Lance on disk. Written but not committed, nothing of them is visible or counted;
committed, the document is whole; committed again under its uri, the old rows go."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from mcp_analysis.store.database import Store
from mcp_analysis.store.fragments import write_fragments
from mcp_analysis.store.models import DocumentMeta
from mcp_analysis.store.writes import DocumentRows

pytestmark = pytest.mark.anyio
pytest.importorskip("lance", reason="the fragment route comes with the extra mcp-analysis[ray]")

TABLES = ("documents", "document_items", "document_tables", "chunks")


def rows(uri: str, text: str) -> DocumentRows:
    doc_id = str(uuid.uuid4())
    meta = DocumentMeta(id=doc_id, uri=uri, title=text, created_at="2026-01-01", updated_at="2026-01-01")
    chunk = {
        "id": str(uuid.uuid4()),
        "document_id": doc_id,
        "content": text,
        "content_fts": text,
        "metadata": "{}",
        "order": 0,
        "vector": [0.5, 0.5, 0.5, 0.5],
    }
    return DocumentRows(meta, {"id": doc_id, "content": text, "docling_document": b"{}"}, [], [chunk])


async def counts(store: Store) -> dict[str, int]:
    return {name: await store.tables[name].count_rows() for name in TABLES}


async def test_fragments_are_seen_only_once_their_batch_is_committed(tmp_path: Path) -> None:
    store = await Store.open(tmp_path / "kb.lancedb", create=True)
    await store.initialize("test-embedder", 4)
    first = rows("file:///docs/log.md", "The pilot boarded at dawn.")
    targets = await store.fragment_targets()
    fragments = write_fragments([first], targets)
    assert set(fragments) == {"documents", "chunks"}
    before = await counts(store)
    reopened = await Store.open(tmp_path / "kb.lancedb")  # another process's view, as after a killed driver
    assert await counts(reopened) == before == dict.fromkeys(TABLES, 0) and await reopened.all_meta() == []

    await store.commit_fragments([first.meta], fragments, targets)
    assert [m.id for m in await store.all_meta()] == [first.meta.id]
    assert await counts(store) == {"documents": 1, "document_items": 0, "document_tables": 0, "chunks": 1}
    assert await store.orphan_ids() == set()

    second = rows("file:///docs/log.md", "The pilot boarded at noon.")  # the same file, changed
    targets = await store.fragment_targets()
    replaced = await store.commit_fragments([second.meta], write_fragments([second], targets), targets)
    assert replaced == [first.meta.id] and [m.id for m in await store.all_meta()] == [second.meta.id]
    chunks = await store.tables["chunks"].query().to_arrow()
    assert chunks.column("content").to_pylist() == ["The pilot boarded at noon."]
