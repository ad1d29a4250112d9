"""The chunks' document_id index is a Bitmap: a filtered view's prefilter is an IN list of every
document it passes, which a B-tree looks up value by value (bench/prefilter.py)."""

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
        assert "Bitmap(document_id)" in (await store.index_names())["chunks"]
        rows = await store.chunks("document_id IN ('d1', 'd3', 'd4')")
    finally:
        store.close()
    assert sorted(r["document_id"] for r in rows) == ["d1", "d3", "d4"]


async def test_a_knowledge_base_made_with_the_btree_gets_the_bitmap(tmp_path: Path) -> None:
    store = await _store(tmp_path)
    try:
        await store.table(schema.CHUNKS).create_index("document_id", config=BTree())  # as made before
        await store.ensure_indexes()
        names = (await store.index_names())["chunks"]
        await store.ensure_indexes()  # idempotent: the bitmap stays
        assert (await store.index_names())["chunks"] == names
        rows = await store.chunks("document_id IN ('d2', 'd5')")
    finally:
        store.close()
    assert [n for n in names if n.endswith("(document_id)")] == ["Bitmap(document_id)"]
    assert sorted(r["document_id"] for r in rows) == ["d2", "d5"]
