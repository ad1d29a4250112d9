"""A filtered view's prefilter reaches the store as the ids of the documents it passes.

The store builds the LanceDB expression itself: each id a literal of an ``isin``, never SQL text
to quote, parse or take apart again, and one expression per view object (an IN list of thousands
of ids is hundreds of kB as SQL, which LanceDB parsed for each leg of every search:
bench/prefilter.py). An id with quotes, SQL or LIKE wildcards in it matches that id only.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mcp_analysis.search.settings import SearchSettings
from mcp_analysis.store.candidates import VisibleDocuments
from mcp_analysis.store.database import Store
from mcp_analysis.store.lance import col
from mcp_analysis.store.writes import DocumentRows
from tests.search.long_sections import rows_of
from tests.store.test_vector_leg import DIMENSION, _document, indexed_store

ANN = {"ef": SearchSettings().ann_ef, "refine_factor": SearchSettings().ann_refine_factor}  # as a search sends them

pytestmark = pytest.mark.anyio

HOSTILE = [
    "o'neil",
    "x') OR ('1'='1",
    "doc-1' OR document_id != '",
    "a'; DROP TABLE chunks; --",
    'say "hi"',
    "%",
    "doc-_",
    "back\\slash')",
]


def test_the_store_builds_the_expression_from_the_ids_once_per_view() -> None:
    visible = VisibleDocuments.of(["doc-2", "o'neil", "doc-1"])
    expression = visible.expression
    assert expression.to_sql() == col("document_id").isin(["doc-1", "doc-2", "o'neil"]).to_sql()
    assert visible.expression is expression  # built once per view object


def test_a_view_passing_most_documents_is_not_in_the_few_it_hides() -> None:
    most = VisibleDocuments.of(["doc-1", "doc-2", "doc-3"], ["o'neil"])
    assert most.expression.to_sql() == (~col("document_id").isin(["o'neil"])).to_sql()
    few = VisibleDocuments.of(["doc-1"], ["doc-2", "doc-3", "o'neil"])
    assert few.expression.to_sql() == col("document_id").isin(["doc-1"]).to_sql()


async def test_a_document_written_after_the_view_never_passes_its_not_in_form(tmp_path: Path) -> None:
    """doc-5 is in neither set (written after the view read its documents): the legs' NOT IN passes
    it, the store's check of each candidate's document does not."""
    store, vectors = await indexed_store(tmp_path / "kb.lancedb", seed=3)
    visible = {f"doc-{i}" for i in range(30)} - {"doc-2", "doc-5"}
    view = VisibleDocuments.of(visible, ["doc-2"])
    try:
        found = await store.candidates("harbour crane", vectors[5 * 20], 100, view, **ANN)
        assert view.expression.to_sql() == (~col("document_id").isin(["doc-2"])).to_sql()
    finally:
        store.close()
    assert found and {c.row["document_id"] for c in found} <= visible
    assert sum(c.vector_rank is not None for c in found) >= 80  # doc-5's 20 chunks took slots, then left


async def test_both_legs_keep_to_the_documents_of_the_view(tmp_path: Path) -> None:
    store, vectors = await indexed_store(tmp_path / "kb.lancedb", seed=3)
    visible = {"doc-2", "doc-17", "doc-29"}
    try:
        found = await store.candidates("harbour crane", vectors[0], 30, VisibleDocuments.of(visible), **ANN)
    finally:
        store.close()
    assert {c.row["document_id"] for c in found} == visible
    assert sum(c.vector_rank is not None for c in found) == 30
    assert sum(c.keyword_rank is not None for c in found) == 30


def _hostile(doc_id: str, index: int, vectors: np.ndarray) -> DocumentRows:
    """A document whose id is `doc_id`, with chunks like `_document`'s."""
    plain = _document(index, vectors)
    chunks = [{**c, "id": f"{doc_id}#{c['order']}", "document_id": doc_id} for c in plain.chunks]
    return rows_of(doc_id, [], chunks)


async def test_an_id_with_quotes_sql_or_wildcards_is_matched_literally(tmp_path: Path) -> None:
    vectors = np.random.default_rng(4).normal(size=(20 * (len(HOSTILE) + 3), DIMENSION)).astype(np.float32)
    store = await Store.open(tmp_path / "kb.lancedb", create=True)
    await store.initialize("test", DIMENSION)
    plain = [_document(i, vectors[i * 20 : (i + 1) * 20]) for i in range(3)]  # doc-0, doc-1, doc-2
    hostile = [_hostile(d, 3 + i, vectors[(3 + i) * 20 : (4 + i) * 20]) for i, d in enumerate(HOSTILE)]
    await store.write_documents([*plain, *hostile])
    try:
        for doc_id in HOSTILE:
            found = await store.candidates("harbour crane", vectors[0], 200, VisibleDocuments.of([doc_id]), **ANN)
            assert {c.row["document_id"] for c in found} == {doc_id}, doc_id
            assert len(found) == 20 and all(json.loads(c.row["metadata"])["labels"] == ["text"] for c in found)
        both = VisibleDocuments.of(["doc-1", "%"])
        found = await store.candidates("harbour crane", vectors[0], 200, both, **ANN)
        assert {c.row["document_id"] for c in found} == {"doc-1", "%"}
        everything = {"doc-0", "doc-1", "doc-2", *HOSTILE}
        for doc_id in HOSTILE:  # a view hiding only `doc_id`: NOT IN that one literal
            view = VisibleDocuments.of(everything - {doc_id}, [doc_id])
            found = await store.candidates("harbour crane", vectors[0], 400, view, **ANN)
            assert {c.row["document_id"] for c in found} == everything - {doc_id}, doc_id
    finally:
        store.close()
