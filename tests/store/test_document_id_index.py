"""The chunks' and items' document_id index is a Bitmap: a filtered view's prefilter is an IN list
of every document it passes, the expansion's items read one of its hits' documents, and a B-tree
looks such lists up value by value (bench/prefilter.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_analysis.store import schema
from mcp_analysis.store.database import Store
from mcp_analysis.store.lance import BTree
from tests.search.long_sections import document_rows

pytestmark = pytest.mark.anyio


async def _store(tmp_path: Path) -> Store:
    store = await Store.open(tmp_path / "kb.lancedb", create=True)
    await store.initialize("test", 4)
    await store.write_documents([document_rows(f"d{i}", 0)[0] for i in range(6)])
    return store


async def test_a_new_knowledge_base_gets_a_bitmap(tmp_path: Path) -> None:
    store = await _store(tmp_path)
    try:
        await store.ensure_indexes()
        names = await store.index_names()
        rows = await store.chunks("document_id IN ('d1', 'd3', 'd4')")
        items = await store.items("document_id IN ('d1', 'd3') AND position < 2")
    finally:
        store.close()
    assert "Bitmap(document_id)" in names["chunks"]
    assert "Bitmap(document_id)" in names["document_items"]
    assert sorted(r["document_id"] for r in rows) == ["d1", "d3", "d4"]
    assert sorted((r["document_id"], r["position"]) for r in items) == [("d1", 0), ("d1", 1), ("d3", 0), ("d3", 1)]


async def test_a_knowledge_base_made_with_the_btree_gets_the_bitmap(tmp_path: Path) -> None:
    store = await _store(tmp_path)
    try:
        for table in (schema.CHUNKS, schema.DOCUMENT_ITEMS):  # as made before
            await store.table(table).create_index("document_id", config=BTree())
        await store.ensure_indexes()
        names = await store.index_names()
        await store.ensure_indexes()  # idempotent: the bitmaps stay
        assert await store.index_names() == names
        rows = await store.chunks("document_id IN ('d2', 'd5')")
    finally:
        store.close()
    for table in (schema.CHUNKS, schema.DOCUMENT_ITEMS):
        assert [n for n in names[table] if n.endswith("(document_id)")] == ["Bitmap(document_id)"]
    assert sorted(r["document_id"] for r in rows) == ["d2", "d5"]
