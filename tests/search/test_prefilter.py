"""A filtered view's chunk prefilter is built once per version of the documents' metadata."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.store.candidates import ViewLegs
from mcp_analysis.store.database import Store
from tests.conftest import make_settings
from tests.search.long_sections import document_rows, rows_of

pytestmark = pytest.mark.anyio


async def test_prefilter_is_built_once_per_metadata_version(tmp_path: Path) -> None:
    db = tmp_path / "kb.lancedb"
    store = await Store.open(db, create=True)
    await store.initialize("test", 4)
    await store.write_documents([document_rows(name, 0)[0] for name in ("alpha", "beta", "gamma")])
    store.close()
    kb = await KnowledgeBase.open(make_settings(db, sessions={"dir": tmp_path / "s"}))
    try:
        first = await kb.prefilter("title != 'gamma'")
        assert first is not None and first.ids == {"alpha", "beta"}
        assert await kb.prefilter("title != 'gamma'") is first  # not rebuilt on the next search
        assert await kb.prefilter("title != 'nothing'") is None  # every document passes
        assert await kb.prefilter(None) is None
        await kb.store.write_documents([document_rows("delta", 0)[0]])
        await kb.refresh(latest=True)
        later = await kb.prefilter("title != 'gamma'")
        assert later is not None and later.ids == {"alpha", "beta", "delta"}  # a new version: built again
    finally:
        await kb.close()


def _legs(kb: KnowledgeBase) -> ViewLegs:
    return ViewLegs(kb.settings.search.flat_search_max_rows, kb.settings.search.post_filter_min_share)


async def _ef(kb: KnowledgeBase, document_filter: str) -> tuple[int, bool]:
    """The ef of the view's vector leg under its prefilter (as the store chooses it), and whether its legs
    run unfiltered first (keeping the unscaled ef)."""
    search = kb.settings.search
    plan = await kb.store.view_plan(await kb.prefilter(document_filter), _legs(kb), vector=True)
    return plan.ef(search.ann_ef, search.candidates * search.ann_refine_factor), plan.post


async def test_a_filtered_view_scales_hnsw_breadth_by_the_share_of_chunks_it_passes(tmp_path: Path) -> None:
    """LanceDB's HNSW walk under a prefilter goes on until ef rows pass (about ef / share nodes): the
    store's plan for a view scales ef by the share of chunks it passes, never below the rows the vector
    leg refines (candidates x refine factor). A view whose legs run unfiltered keeps ef for them (its
    scaled ef serves a leg run again under the prefilter). Documents without chunks (d10 .. d99) count
    for nothing: a view passing most documents but few chunks is scaled by its chunks."""
    db = tmp_path / "kb.lancedb"
    store = await Store.open(db, create=True)
    await store.initialize("test", 4)
    await store.write_documents([document_rows(f"d{i}", 0)[0] for i in range(10)])  # a chunk each
    await store.write_documents([rows_of(f"d{i}", [], []) for i in range(10, 100)])  # none
    store.close()
    search = {"candidates": 5, "flat_search_max_rows": 0}  # no exact scan: the legs walk the graph
    kb = await KnowledgeBase.open(make_settings(db, sessions={"dir": tmp_path / "s"}, search=search))
    try:
        assert await kb.prefilter("title != 'nothing'") is None  # no prefilter: every document passes
        assert await _ef(kb, "title = 'd3'") == (103, False)  # 1 of 10 chunks: 1024 x 1/10, rounded up
        assert await _ef(kb, "title != 'd3'") == (922, True)  # 9 of 10: 1024 x 9/10; its legs run unfiltered
        # 91 of 100 documents, 1 of 10 chunks: prefiltered, at a tenth of ef (by its documents, 1024).
        assert await _ef(kb, "title = 'd3' OR uri LIKE '%/d__.md'") == (103, False)
    finally:
        await kb.close()
    never_post = {"candidates": 50, "post_filter_min_share": 2, "flat_search_max_rows": 0}
    kb = await KnowledgeBase.open(make_settings(db, sessions={"dir": tmp_path / "s"}, search=never_post))
    try:
        assert await _ef(kb, "title = 'd3'") == (200, False)  # the 50 x 4 rows the leg refines
        assert await _ef(kb, "title != 'd3'") == (922, False)  # 1024 x 9/10, rounded up: legs prefiltered
    finally:
        await kb.close()
