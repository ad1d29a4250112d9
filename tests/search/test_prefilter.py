"""A filtered view's chunk prefilter is built once per version of the documents' metadata."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.store.database import Store
from tests.conftest import make_settings
from tests.search.long_sections import document_rows

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


async def test_a_filtered_view_scales_hnsw_breadth_by_the_share_it_passes(tmp_path: Path) -> None:
    """LanceDB's HNSW walk under a prefilter goes on until ef rows pass (about ef / share nodes):
    a view passing a tenth of the documents searches with a tenth of ef, never below the rows the
    vector leg refines (candidates x refine factor); a view whose legs run unfiltered keeps ef."""
    db = tmp_path / "kb.lancedb"
    store = await Store.open(db, create=True)
    await store.initialize("test", 4)
    await store.write_documents([document_rows(f"d{i}", 0)[0] for i in range(10)])
    store.close()
    kb = await KnowledgeBase.open(make_settings(db, sessions={"dir": tmp_path / "s"}, search={"candidates": 5}))
    try:
        assert kb.search_settings(None).ann_ef == 1024
        assert kb.search_settings("title = 'd3'").ann_ef == 1024  # its prefilter is not built yet
        await kb.prefilter("title = 'd3'")
        assert kb.search_settings("title = 'd3'").ann_ef == 103  # 1024 x 1/10, rounded up
        await kb.prefilter("title != 'd3'")
        assert kb.search_settings("title != 'd3'").ann_ef == 1024  # its legs run unfiltered (post_filter_min_share)
        await kb.prefilter("title != 'nothing'")
        assert kb.search_settings("title != 'nothing'").ann_ef == 1024  # no prefilter: every document passes
    finally:
        await kb.close()
    never_post = {"candidates": 50, "post_filter_min_share": 2}
    kb = await KnowledgeBase.open(make_settings(db, sessions={"dir": tmp_path / "s"}, search=never_post))
    try:
        await kb.prefilter("title = 'd3'")
        assert kb.search_settings("title = 'd3'").ann_ef == 200  # the 50 x 4 rows the leg refines
        await kb.prefilter("title != 'd3'")
        assert kb.search_settings("title != 'd3'").ann_ef == 922  # 1024 x 9/10, rounded up: legs prefiltered
    finally:
        await kb.close()
