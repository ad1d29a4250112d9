"""Search candidates: what LanceDB's hybrid query returns, and what the store returns instead.

LanceDB 0.40's hybrid query fuses both legs by rank and cuts the fused list to its limit, so
a re-ranker over it only re-orders rank fusion's choice: the first test pins that, the others
show the store's candidates hold each leg's rows, under the document filter in both legs.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.search.settings import SearchSettings
from mcp_analysis.store.candidates import VisibleDocuments
from mcp_analysis.store.lance import FTS, lancedb

ANN = {"ef": SearchSettings().ann_ef, "refine_factor": SearchSettings().ann_refine_factor}  # as a search sends them

pytestmark = pytest.mark.anyio


def _rows() -> list[dict]:
    """20 rows the vector leg ranks first (no query word) and 20 the full-text leg ranks first."""
    near = [{"id": f"v{i}", "text": f"filler text number {i}", "vector": [1.0, 0.01 * i, 0.0]} for i in range(20)]
    words = [{"id": f"k{i}", "text": f"harbour crane {i}", "vector": [0.0, 0.01 * i, 1.0]} for i in range(20)]
    return near + words


async def test_lancedb_hybrid_query_returns_at_most_limit_fused_rows(tmp_path: Path) -> None:
    db = await lancedb.connect_async(str(tmp_path / "pin.lancedb"))
    table = await db.create_table("t", data=_rows())
    await table.create_index("text", config=FTS(with_position=False))
    query = np.array([1.0, 0.0, 0.0], dtype=np.float32)
    legs = {
        "vector": await table.query().nearest_to(query).limit(5).to_list(),
        "text": await table.query().nearest_to_text("harbour crane").limit(5).to_list(),
    }
    assert {r["id"][0] for r in legs["vector"]} == {"v"} and {r["id"][0] for r in legs["text"]} == {"k"}
    fused = await table.query().nearest_to(query).nearest_to_text("harbour crane").limit(5).to_list()
    # Ten different rows came back from the legs, but the hybrid query returns `limit` of them.
    assert len(fused) == 5


async def _vector(kb: KnowledgeBase, query: str) -> np.ndarray:
    return await (await kb.embedder()).embed_query(query)


async def test_candidates_are_each_legs_rows_with_both_scores(kb: KnowledgeBase) -> None:
    query = "CVE-2025-30412 firmware update"
    found = await kb.store.candidates(query, await _vector(kb, query), 20, None, **ANN)
    vector_leg = [c for c in found if c.vector_rank is not None]
    keyword_leg = [c for c in found if c.keyword_rank is not None]
    assert len(vector_leg) == 20 and len(keyword_leg) >= 10
    assert len(found) > 20  # the union, not a fused top 20
    assert all(c.cosine is not None and -1.0 <= c.cosine <= 1.0 for c in found)
    assert all((c.keyword is None) == (c.keyword_rank is None) for c in found)
    best = min(keyword_leg, key=lambda c: c.keyword_rank or 0)
    assert "CVE-2025-30412" in best.row["content"]


async def test_a_filtered_search_finds_no_chunk_outside_the_filter_in_either_leg(kb: KnowledgeBase) -> None:
    advisories = {d.id for d in await (await kb.open_corpus("uri LIKE '%advisory%'")).documents()}
    query = "quarterly revenue by region total"  # both legs prefer the financial reports
    vector = await _vector(kb, query)
    unfiltered = await kb.store.candidates(query, vector, 10, None, **ANN)
    assert {c.row["document_id"] for c in unfiltered[:5]} - advisories
    found = await kb.store.candidates(query, vector, 1000, VisibleDocuments.of(advisories), **ANN)
    assert found and {c.row["document_id"] for c in found} <= advisories
    assert any(c.keyword_rank for c in found) and any(c.vector_rank for c in found)
    assert await kb.store.candidates(query, vector, 1000, VisibleDocuments.of([]), **ANN) == []
