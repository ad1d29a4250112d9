"""A filtered vector leg over an HNSW index, at the breadth a filtered view searches with.

The store scales ef by the share of chunks a view passes (`ViewPlan.ef`: LanceDB keeps walking the
graph until ef rows pass the prefilter); the leg must still find the nearest visible chunks.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.store.candidates import ViewLegs
from tests.conftest import make_settings
from tests.store.test_vector_leg import DIMENSION, _document

pytestmark = pytest.mark.anyio


async def test_a_tenth_of_the_chunks_at_a_tenth_of_ef(tmp_path: Path) -> None:
    rng = np.random.default_rng(11)
    vectors = rng.normal(size=(1200, DIMENSION)).astype(np.float32)
    db = tmp_path / "kb.lancedb"
    settings = make_settings(db, sessions={"dir": tmp_path / "s"}, search={"candidates": 10})
    kb = await KnowledgeBase.open(settings, create=True)
    try:
        await kb.store.initialize("test", DIMENSION)
        await kb.store.write_documents([_document(i, vectors[i * 20 : (i + 1) * 20]) for i in range(60)])
        await kb.store.ensure_indexes(vector_index_min_rows=1)
        await kb.refresh(latest=True)
        document_filter = "id IN ('doc-3', 'doc-13', 'doc-23', 'doc-33', 'doc-43', 'doc-53')"
        prefilter = await kb.prefilter(document_filter)
        search = kb.settings.search
        plan = await kb.store.view_plan(prefilter, ViewLegs(), vector=True)
        assert plan.ef(search.ann_ef, search.candidates * search.ann_refine_factor) == 103  # 1024 x 120/1200 chunks
        query = rng.normal(size=DIMENSION).astype(np.float32)
        found = await kb.store.candidates(
            "harbour crane",
            query,
            search.candidates,
            prefilter,
            ef=search.ann_ef,
            refine_factor=search.ann_refine_factor,
        )
    finally:
        await kb.close()
    visible = np.concatenate([vectors[d * 20 : (d + 1) * 20] for d in (3, 13, 23, 33, 43, 53)])
    cosines = visible @ query / (np.linalg.norm(visible, axis=1) * np.linalg.norm(query))
    order = np.argsort(-cosines)[:5]
    exact = {f"doc-{(3, 13, 23, 33, 43, 53)[i // 20]}-{i % 20}" for i in order}
    leg = sorted((c for c in found if c.vector_rank is not None), key=lambda c: c.vector_rank or 0)
    assert {c.key for c in leg[:5]} == exact
    assert all(c.row["document_id"] in {f"doc-{d}" for d in (3, 13, 23, 33, 43, 53)} for c in found)
