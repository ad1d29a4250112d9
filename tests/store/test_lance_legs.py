"""The legs through Lance's scanner (store/lance_legs.py), on a real LanceDB with an HNSW index.

A filtered view's legs run under its chunk rows as Lance's allowlist, looked up once per view and
version. The legs themselves, before the store's own check of each candidate's document, must never
return a chunk of a document the view hides: the queries below are a hidden chunk's own vector and
words only hidden documents hold most, so a leg that lost the allowlist would return hidden chunks
first. And a search of an indexed table gives the same candidates through Lance as through LanceDB
(rows added after the full-text index was built are scored by each with its own statistics).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mcp_analysis.store import lance_legs
from mcp_analysis.store.candidates import CHUNK_COLUMNS, VIEW_REFINE_FACTOR, ViewLegs, VisibleDocuments
from tests.conftest import REPO
from tests.store.test_vector_leg import indexed_store
from tests.store.test_view_legs import DOCUMENTS, _exact

pytestmark = pytest.mark.anyio

HIDDEN = {"doc-7", "doc-17", "doc-27"}


async def test_the_legs_under_a_views_allowlist_never_return_a_hidden_documents_chunk(tmp_path: Path) -> None:
    store, vectors = await indexed_store(tmp_path / "kb.lancedb", seed=31)
    visible = set(DOCUMENTS) - HIDDEN - {f"doc-{i}" for i in range(10)}  # 18 of 30: prefiltered, not post-filtered
    view = VisibleDocuments.of(visible, set(DOCUMENTS) - visible)
    query = vectors[20 * 7 + 4]  # a chunk of doc-7
    try:
        plan = await store.view_plan(view, ViewLegs(post_filter_min_share=0.9), vector=True)
        legs = await store.scanner_legs()
        assert legs is not None and plan.rows is not None and plan.rows.allowed
        assert (plan.flat, plan.post, plan.rows.rows) == (False, False, 20 * len(visible))
        unit = query / np.linalg.norm(query)
        columns = list(CHUNK_COLUMNS)
        nearest = legs.vector(plan.rows.version, unit, columns, 30, plan.rows.allowed, ef=512, refine_factor=4)
        exact = legs.vector(plan.rows.version, unit, columns, 30, plan.rows.allowed, ef=None, refine_factor=4)
        words = legs.keyword(plan.rows.version, "7", columns, 30, plan.rows.allowed)
    finally:
        store.close()
    assert len(nearest) == len(exact) == 30
    assert words.num_rows == len(visible)  # chunk 7 of each visible document (all of doc-7's are hidden)
    assert {row["document_id"] for row in nearest + exact} <= visible
    assert set(words.column("document_id").to_pylist()) <= visible
    assert [row["id"] for row in exact] == _exact(vectors, query, visible, 30)
    assert [row["id"] for row in nearest][:10] == _exact(vectors, query, visible, 10)


async def test_a_search_finds_the_same_candidates_through_lance_and_through_lancedb(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, vectors = await indexed_store(tmp_path / "kb.lancedb", seed=32)
    visible = set(DOCUMENTS) - HIDDEN
    query = vectors[20 * 17 + 3]
    forms = {
        "prefiltered": (VisibleDocuments.of(visible, HIDDEN), ViewLegs()),
        "post-filtered": (VisibleDocuments.of(visible, HIDDEN), ViewLegs(post_filter_min_share=0.5)),
        "flat": (VisibleDocuments.of(visible, HIDDEN), ViewLegs(flat_max_rows=1000)),
        "sampled": (VisibleDocuments.of(visible, HIDDEN), ViewLegs(sample_min_chunks=0)),  # through Lance only
        "by ids": (VisibleDocuments.of(visible), ViewLegs()),
        "unfiltered": (None, ViewLegs()),
    }

    async def search() -> dict[str, list[tuple[str, int | None, int | None]]]:
        out = {}
        for name, (view, legs) in forms.items():
            found = await store.candidates("crane 17", query, 25, view, ef=512, refine_factor=4, view_legs=legs)
            out[name] = [(c.key, c.vector_rank, c.keyword_rank) for c in found]
        return out

    try:
        through_lance = await search()
        monkeypatch.setattr(lance_legs, "available", lambda: False)
        through_lancedb = await search()
    finally:
        store.close()
    assert through_lance == through_lancedb
    for name, found in through_lance.items():
        assert len(found) >= 25, name
        assert name == "unfiltered" or not {key.rsplit("-", 1)[0] for key, _, _ in found} & HIDDEN, name


async def test_the_scanner_runs_the_legs_from_search_scanner_min_chunks_on_and_stays(tmp_path: Path) -> None:
    """Below the bound the legs run through LanceDB (the scanner's library is not worth its memory there);
    once the chunks table reaches it, through the scanner, and from then on (its cache holds the indexes)."""
    store, vectors = await indexed_store(tmp_path / "kb.lancedb", seed=33)  # 600 chunks
    try:
        assert await store.scanner_legs(601) is None
        legs = await store.scanner_legs(600)
        assert legs is not None
        assert await store.scanner_legs(601) is legs
        found = await store.candidates("crane 7", vectors[3], 10, None, ef=64, refine_factor=4)
    finally:
        store.close()
    assert len([c for c in found if c.vector_rank is not None]) == 10


PROGRAM = """
import asyncio, json, sys
from pathlib import Path
from mcp_analysis.store.candidates import ViewLegs, VisibleDocuments
from tests.store.test_vector_leg import indexed_store

async def main():
    store, vectors = await indexed_store(Path(sys.argv[1]), seed=34)
    view = VisibleDocuments.of({"doc-1", "doc-2"}, {f"doc-{i}" for i in range(3, 30)} | {"doc-0"})
    report = {}
    for bound in (601, 600):
        found = await store.candidates("crane", vectors[5], 10, view, ef=64, refine_factor=4,
                                       view_legs=ViewLegs(scanner_min_rows=bound))
        report[bound] = ["lance" in sys.modules, len(found)]
    store.close()
    print(json.dumps(report))

asyncio.run(main())
"""


def test_a_store_below_the_bound_never_imports_pylance(tmp_path: Path) -> None:
    """Its library is what the bound saves (its import: `bench/view_split.py --allowlist`): a search below
    it must not import it, not even to ask whether it offers the allowlist. In a fresh process, as the
    test session has imported it already."""
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(tmp_path / "kb.lancedb")],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert [report["601"][0], report["600"][0]] == [False, True]  # imported only at the bound
    assert report["601"][1] == report["600"][1] > 0


async def test_a_views_prefiltered_vector_leg_refines_fewer_rows_at_the_same_walk_and_only_the_views(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under a view's allowlist the vector leg walks as broadly as the unfiltered leg's re-rank needs (ef at
    least rows x the caller's refine factor) and re-ranks `VIEW_REFINE_FACTOR` x rows exactly; an unfiltered
    search keeps the caller's factor. Through the store's own search, the query a hidden chunk's vector: the
    leg still finds as many of the view's chunks as it asks for, the exact nearest first, and none hidden (a
    leg without the allowlist would find hidden ones first, and the store's check would leave it short)."""
    store, vectors = await indexed_store(tmp_path / "kb.lancedb", seed=35)
    visible = set(DOCUMENTS) - HIDDEN - {f"doc-{i}" for i in range(10)}  # 18 of 30: prefiltered
    view = VisibleDocuments.of(visible, set(DOCUMENTS) - visible)
    query = vectors[20 * 17 + 9]  # a chunk of doc-17
    sent: list[tuple[bool, int | None, int]] = []
    vector = lance_legs.LanceLegs.vector

    def recorded(self: lance_legs.LanceLegs, *args: Any, ef: int | None, refine_factor: int) -> Any:
        sent.append((isinstance(args[-1], bytes), ef, refine_factor))  # the allowlist, as the leg got it
        return vector(self, *args, ef=ef, refine_factor=refine_factor)

    monkeypatch.setattr(lance_legs.LanceLegs, "vector", recorded)
    try:
        legs = ViewLegs(post_filter_min_share=0.9)
        found = await store.candidates("crane 17", query, 30, view, ef=64, refine_factor=4, view_legs=legs)
        unfiltered = await store.candidates("crane 17", query, 30, None, ef=64, refine_factor=4, view_legs=legs)
    finally:
        store.close()
    leg = sorted((c for c in found if c.vector_rank is not None), key=lambda c: c.vector_rank or 0)
    assert len(leg) == 30
    assert not {c.row["document_id"] for c in found} - visible
    assert [c.key for c in leg][:10] == _exact(vectors, query, visible, 10)
    assert sorted(c.vector_rank or 0 for c in unfiltered if c.vector_rank)[:30] == list(range(1, 31))
    assert sent == [(True, 120, VIEW_REFINE_FACTOR), (False, 120, 4)]  # ef: 30 rows x 4, under the view too


async def test_a_knowledge_base_written_again_to_the_same_version_is_searched_as_it_is_now(tmp_path: Path) -> None:
    """Deleted and written again (other chunks, the same number of writes) under an open store: the scanner's
    dataset of that version number names files that are gone; the search opens it afresh and finds the new
    chunks, and a view's rows are found again in it (its old row ids name other documents' rows now)."""
    path = tmp_path / "kb.lancedb"
    store, before = await indexed_store(path, seed=41)
    visible = set(DOCUMENTS) - HIDDEN
    view = VisibleDocuments.of(visible, HIDDEN)
    try:
        await store.candidates("crane", before[20 * 3 + 2], 10, view, ef=64, refine_factor=4)
        version = await store.tables["chunks"].version()
        shutil.rmtree(path)
        again, after = await indexed_store(path, seed=42, reverse=True)
        again.close()
        assert await store.tables["chunks"].version() == version
        query = after[20 * 17 + 5]  # a chunk of doc-17 (hidden) as written now
        unfiltered = await store.candidates("crane", query, 10, None, ef=512, refine_factor=4)
        filtered = await store.candidates("crane", query, 10, view, ef=512, refine_factor=4)
    finally:
        store.close()
    assert unfiltered[0].key == "doc-17-5" and unfiltered[0].cosine == pytest.approx(1.0, abs=1e-5)
    by_vector = [c for c in filtered if c.vector_rank is not None]
    assert len(by_vector) == 10 and {c.row["document_id"] for c in filtered} <= visible
    assert [c.key for c in sorted(by_vector, key=lambda c: c.vector_rank or 0)] == _exact(after, query, visible, 10)
