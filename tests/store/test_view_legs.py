"""How the legs keep to a filtered view (`ViewLegs`), on a real LanceDB with an HNSW index.

A view passing few chunks has its vector leg scan exactly those rows; a view passing most documents
runs both legs unfiltered and keeps its own, and runs a leg again under the prefilter when too few
of its rows are the view's; a view between may have its vector leg sampled (the index walked
unfiltered, the view's rows among those found ranked exactly), under the prefilter when too few
are the view's. Whichever form runs, no chunk of a hidden document is a candidate, and
the vector leg finds the exact nearest visible chunks: the query is a hidden chunk's own vector, so
a leg that lost the view's prefilter would fill its rows with hidden chunks and find fewer.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mcp_analysis.store import candidates
from mcp_analysis.store.candidates import Candidate, ViewLegs, ViewPlan, VisibleDocuments
from mcp_analysis.store.database import Store
from tests.store.test_vector_leg import DIMENSION, _document, indexed_store

pytestmark = pytest.mark.anyio

DOCUMENTS = [f"doc-{i}" for i in range(30)]  # indexed_store's: 20 chunks each, chunk c of doc-i is row 20 i + c
ANN = {"ef": 512, "refine_factor": 4}


def _exact(vectors: np.ndarray, query: np.ndarray, visible: set[str], k: int) -> list[str]:
    """The k chunks of the visible documents nearest to `query` by cosine, nearest first."""
    keys = [f"doc-{i // 20}-{i % 20}" for i in range(len(vectors))]
    rows = [i for i, key in enumerate(keys) if key.rsplit("-", 1)[0] in visible]
    unit = vectors[rows] / np.linalg.norm(vectors[rows], axis=1, keepdims=True)
    similarity = unit @ (query / np.linalg.norm(query))
    return [keys[rows[i]] for i in np.argsort(-similarity, kind="stable")[:k]]


async def _crowded(path: Path, seed: int, hidden: int) -> tuple[Store, np.ndarray, np.ndarray, set[str]]:
    """30 documents of 20 chunks, the first `hidden` (hidden from the view) holding every chunk near the query."""
    rng = np.random.default_rng(seed)
    query = rng.normal(size=DIMENSION).astype(np.float32)
    near = query + 0.01 * rng.normal(size=(20 * hidden, DIMENSION)).astype(np.float32)
    far = rng.normal(size=(20 * (30 - hidden), DIMENSION)).astype(np.float32)
    vectors = np.vstack([near, far])
    store = await Store.open(path, create=True)
    await store.initialize("test", DIMENSION)
    await store.write_documents([_document(i, vectors[i * 20 : (i + 1) * 20]) for i in range(30)])
    await store.ensure_indexes(vector_index_min_rows=1)
    return store, vectors, query, {f"doc-{i}" for i in range(hidden)}


def _vector_leg(found: list[Candidate]) -> list[str]:
    return [c.key for c in sorted((c for c in found if c.vector_rank is not None), key=lambda c: c.vector_rank or 0)]


async def test_a_flat_scan_view_finds_the_exact_nearest_visible_chunks_and_no_hidden_one(tmp_path: Path) -> None:
    store, vectors = await indexed_store(tmp_path / "kb.lancedb", seed=21)
    visible = {"doc-3", "doc-11", "doc-26"}  # 60 chunks: at most flat_max_rows
    view = VisibleDocuments.of(visible, set(DOCUMENTS) - visible)
    query = vectors[20 * 7 + 4]  # a chunk of doc-7, which the view hides
    try:
        found = await store.candidates("harbour crane", query, 20, view, view_legs=ViewLegs(flat_max_rows=100), **ANN)
        again = await store.candidates("harbour crane", query, 20, view, view_legs=ViewLegs(flat_max_rows=100), **ANN)
    finally:
        store.close()
    assert {c.row["document_id"] for c in found} <= visible
    assert _vector_leg(found) == _exact(vectors, query, visible, 20)
    assert _vector_leg(again) == _vector_leg(found)  # the second search reads the view's counted rows


async def test_a_view_passing_most_documents_keeps_its_own_rows_of_unfiltered_legs(tmp_path: Path) -> None:
    store, vectors = await indexed_store(tmp_path / "kb.lancedb", seed=22)
    hidden = {"doc-2", "doc-7", "doc-19"}
    view = VisibleDocuments.of(set(DOCUMENTS) - hidden, hidden)
    query = vectors[20 * 7 + 4]
    legs = ViewLegs(post_filter_min_share=0.5)  # the view passes 0.9
    try:
        found = await store.candidates("harbour crane", query, 30, view, view_legs=legs, **ANN)
    finally:
        store.close()
    assert not {c.row["document_id"] for c in found} & hidden
    assert _vector_leg(found) == _exact(vectors, query, set(DOCUMENTS) - hidden, 30)
    assert sum(c.keyword_rank is not None for c in found) == 30


async def test_an_unfiltered_leg_left_with_too_few_of_the_views_rows_runs_again_under_it(tmp_path: Path) -> None:
    """The hidden documents hold every chunk near the query: the unfiltered legs' over-fetch (per leg / share
    rows) holds fewer than per leg of the view's, so each leg runs again under the prefilter."""
    store, vectors, query, hidden = await _crowded(tmp_path / "kb.lancedb", 23, 10)
    view = VisibleDocuments.of(set(DOCUMENTS) - hidden, hidden)
    try:
        found = await store.candidates(
            "harbour crane", query, 40, view, view_legs=ViewLegs(post_filter_min_share=0.5), **ANN
        )
    finally:
        store.close()
    assert not {c.row["document_id"] for c in found} & hidden
    assert _vector_leg(found) == _exact(vectors, query, set(DOCUMENTS) - hidden, 40)
    assert sum(c.keyword_rank is not None for c in found) == 40


async def test_a_sampled_vector_leg_finds_the_exact_nearest_visible_chunks_and_no_hidden_one(tmp_path: Path) -> None:
    store, vectors = await indexed_store(tmp_path / "kb.lancedb", seed=25)
    visible = {f"doc-{i}" for i in range(0, 30, 3)}  # 10 of 30 documents, 200 of 600 chunks
    view = VisibleDocuments.of(visible, set(DOCUMENTS) - visible)
    query = vectors[20 * 7 + 4]  # a chunk of doc-7, which the view hides
    unit = query / np.linalg.norm(query)
    legs = ViewLegs(sample_min_chunks=0)
    try:
        plan = await store.view_plan(view, legs, vector=True)
        assert (plan.flat, plan.post, plan.sampled, plan.share) == (False, False, True, 200 / 600)
        lance = await store.scanner_legs()
        assert lance is not None and plan.rows is not None
        sampled = lance.sampled(plan.rows.version, unit, ["id", "document_id"], 20, 90, view.passes, ef=512)
        # More rows asked for than the view has: a walk that saw every chunk is complete, not short.
        every = lance.sampled(plan.rows.version, unit, ["id", "document_id"], 250, 1125, view.passes, ef=512)
        found = await store.candidates("harbour crane", query, 20, view, view_legs=legs, **ANN)
        below = await store.view_plan(view, ViewLegs(sample_min_chunks=601), vector=True)
    finally:
        store.close()
    assert sampled is not None and [row["id"] for row in sampled] == _exact(vectors, query, visible, 20)
    assert every is not None and [row["id"] for row in every] == _exact(vectors, query, visible, 200)
    distances = [row["_distance"] for row in sampled]
    assert distances == sorted(distances) and all(0 <= d <= 2 for d in distances)
    assert {c.row["document_id"] for c in found} <= visible
    assert _vector_leg(found) == _exact(vectors, query, visible, 20)
    assert not below.sampled  # a table of fewer than sample_min_chunks chunks: the walk under the prefilter


async def test_a_leg_asked_for_more_rows_than_a_sampled_walk_takes_walks_under_the_prefilter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, vectors = await indexed_store(tmp_path / "kb.lancedb", seed=27)
    visible = {f"doc-{i}" for i in range(0, 30, 3)}
    view = VisibleDocuments.of(visible, set(DOCUMENTS) - visible)
    query = vectors[20 * 7 + 4]
    walked: list[int] = []
    try:
        lance = await store.scanner_legs()
        assert lance is not None
        sampled = lance.sampled
        monkeypatch.setattr(lance, "sampled", lambda *a, **k: walked.append(a[4]) or sampled(*a, **k))
        monkeypatch.setattr(candidates, "SAMPLED_MAX_ROWS", 60)  # 20 rows of a third: 90 to walk
        found = await store.candidates("harbour crane", query, 20, view, view_legs=ViewLegs(sample_min_chunks=0), **ANN)
        monkeypatch.setattr(candidates, "SAMPLED_MAX_ROWS", 90)
        again = await store.candidates("harbour crane", query, 20, view, view_legs=ViewLegs(sample_min_chunks=0), **ANN)
    finally:
        store.close()
    assert walked == [90]  # only the second search sampled
    assert _vector_leg(found) == _vector_leg(again) == _exact(vectors, query, visible, 20)


async def test_a_sampled_vector_leg_with_too_few_of_the_views_rows_runs_under_the_prefilter(tmp_path: Path) -> None:
    """The hidden documents hold every chunk near the query: the sampled walk finds fewer than per leg of the
    view's rows, says so (None), and the leg runs under the view's prefilter."""
    store, vectors, query, hidden = await _crowded(tmp_path / "kb.lancedb", 26, 20)
    view = VisibleDocuments.of(set(DOCUMENTS) - hidden, hidden)
    legs = ViewLegs(sample_min_chunks=0)
    try:
        plan = await store.view_plan(view, legs, vector=True)
        lance = await store.scanner_legs()
        assert plan.sampled and lance is not None and plan.rows is not None
        unit = query / np.linalg.norm(query)
        assert lance.sampled(plan.rows.version, unit, ["id", "document_id"], 20, 90, view.passes, ef=512) is None
        found = await store.candidates("harbour crane", query, 20, view, view_legs=legs, **ANN)
    finally:
        store.close()
    assert not {c.row["document_id"] for c in found} & hidden
    assert _vector_leg(found) == _exact(vectors, query, set(DOCUMENTS) - hidden, 20)


async def test_the_form_follows_the_chunks_a_view_passes_not_only_its_documents(tmp_path: Path) -> None:
    """A view passing most documents but few chunks (documents with no chunks pass, the chunky ones are
    hidden: many short mails, a few long reports) runs no unfiltered leg: each would fall short of its
    rows every time and run again under the prefilter. Few enough chunks are scanned exactly; the
    counts are taken again once the table changes."""
    store, _ = await indexed_store(tmp_path / "kb.lancedb", seed=24)
    empty = {f"mail-{i}" for i in range(100)}  # passed, no chunks
    skewed = VisibleDocuments.of({"doc-0", "doc-1", "doc-2"} | empty, set(DOCUMENTS[3:]))  # 103 of 130
    plain = VisibleDocuments.of(set(DOCUMENTS[3:]), set(DOCUMENTS[:3]))  # 27 of 30, 540 of 600 chunks
    post = ViewLegs(post_filter_min_share=0.5)
    try:
        assert skewed.share > 0.75
        assert await store.view_plan(skewed, post, vector=True) == ViewPlan(False, False, 0.1)
        assert await store.view_plan(skewed, ViewLegs(100, 0.5), vector=True) == ViewPlan(True, False, 0.1)
        assert await store.view_plan(skewed, ViewLegs(100, 0.5), vector=False) == ViewPlan(False, False, 0.1)
        assert await store.view_plan(plain, post, vector=True) == ViewPlan(False, True, 0.9)
        assert await store.view_plan(None, post, vector=True) == ViewPlan()
        # No form to choose: its share still scales the vector leg's ef (of the chunks, found for the legs'
        # allowlist; of the documents without pylance, its chunks not counted).
        assert await store.view_plan(plain, ViewLegs(), vector=True) == ViewPlan(False, False, 0.9)
        await store.delete_documents(DOCUMENTS[3:18])  # 15 of the plain view's 27 documents gone
        assert await store.view_plan(plain, post, vector=True) == ViewPlan(False, True, 0.8)
    finally:
        store.close()
