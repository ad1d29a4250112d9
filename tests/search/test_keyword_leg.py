"""Keyword mode asks the full-text leg for the rows it shows, not for `search.candidates`.

Without a query vector nothing re-ranks the candidates: the hits are the leg's first 2 x limit
+ 5 in its order. Fetching `search.candidates` (50) instead walks longer posting lists and reads
more rows, which costs about what LanceDB's whole query does at a million chunks
(bench/search.py --mode keyword). The results must be those of the longer fetch; when bare
headings joining their sections leave fewer rows, the longer fetch is made.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mcp_analysis.search.expand import expand_hits
from mcp_analysis.search.hybrid import hybrid_search
from mcp_analysis.search.passages import search_passages
from mcp_analysis.search.settings import SearchSettings
from mcp_analysis.store.database import Store
from tests.search.long_sections import rows_of

pytestmark = pytest.mark.anyio


class _Legs:
    """The real store, with the rows per leg each candidate fetch asked for."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.asked: list[int] = []

    async def candidates(self, query: str, vector: Any, per_leg: int, *args: Any, **kwargs: Any) -> Any:
        self.asked.append(per_leg)
        return await self.store.candidates(query, vector, per_leg, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def _document(doc: int, bare_heading: bool) -> Any:
    """A document of 8 chunks about cranes (one item each, of different lengths: no ties in the leg's
    order). The first two name gantries, so the leg ranks them first; with `bare_heading` the first
    is a heading, which joins the second: the leg's first 15 rows then make fewer than 15 hits."""
    doc_id = f"doc-{doc}"
    items, chunks = [], []
    for c in range(8):
        heading = bare_heading and c == 0
        words = {
            0: f"gantry {'crane ' * (1 + doc)}",
            1: f"gantry {'crane ' * (1 + doc)}{'filler ' * 30}",
        }.get(c, f"{'crane ' * (2 + doc * 8 + c)}note")
        text = "Gantry cranes" if heading else words
        label = "section_header" if heading else "text"
        items.append(
            {
                "document_id": doc_id,
                "position": c,
                "self_ref": f"#/texts/{c}",
                "label": label,
                "text": text,
                "page_numbers": [1],
                "heading_level": 1 if heading else None,
                "picture_data": None,
                "chunk_ids": [f"{doc_id}-{c}"],
            }
        )
        meta = {"item_range": [c, c], "section_range": [0, 7], "labels": [label], "headings": ["Gantry cranes"]}
        chunks.append(
            {
                "id": f"{doc_id}-{c}",
                "document_id": doc_id,
                "content": f"# {text}" if heading else text,
                "content_fts": words,
                "metadata": json.dumps(meta),
                "order": c,
                "vector": [1.0, 0.0, 0.0, 0.0],
            }
        )
    return rows_of(doc_id, items, chunks)


@pytest.mark.parametrize("bare_headings", [False, True])
async def test_keyword_mode_fetches_the_rows_it_shows(tmp_path: Path, bare_headings: bool) -> None:
    store = await Store.open(tmp_path / "kb.lancedb", create=True)
    await store.initialize("test", 4)
    documents = [_document(d, bare_headings) for d in range(12)]
    await store.write_documents(documents)
    await store.ensure_indexes()
    visible = {d.meta.id: d.meta for d in documents}
    settings = SearchSettings(mode="keyword", max_context_chars=300)
    legs = _Legs(store)
    try:
        found = await search_passages(legs, None, "gantry crane", 5, None, visible, settings)  # type: ignore[arg-type]
        hits = await hybrid_search(
            store,
            None,
            "gantry crane",
            settings.candidates,
            None,
            ef=settings.ann_ef,
            refine_factor=settings.ann_refine_factor,
        )
        expected = await expand_hits(store, hits[:15], visible.get, settings.max_context_chars, 5)
    finally:
        store.close()
    assert [r.model_dump() for r in found] == [r.model_dump() for r in expected]
    # Without bare headings the 15 rows shown are all it reads; joined headings leave fewer: all 50.
    assert legs.asked == ([15, 50] if bare_headings else [15])
