"""A filtered view's prefilter reaches LanceDB as an expression, not as SQL text to parse.

An IN list of thousands of document ids is hundreds of kB of SQL, which LanceDB parsed for
each leg of every search (bench/prefilter.py). The view's ``document_id IN (...)`` becomes an
``isin`` expression with exactly the same ids; anything else stays the SQL it is.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_analysis.store.candidates import prefilter_expression
from mcp_analysis.store.filters import sql_in
from mcp_analysis.store.lance import col
from tests.store.test_vector_leg import indexed_store

pytestmark = pytest.mark.anyio


def test_a_views_in_list_becomes_an_expression_anything_else_stays_sql() -> None:
    ids = [f"doc-{i}" for i in range(3)] + ["o'neil"]
    expression = prefilter_expression(sql_in("document_id", ids))
    assert not isinstance(expression, str)
    assert expression.to_sql() == col("document_id").isin(ids).to_sql()
    assert prefilter_expression(sql_in("document_id", ids)) is expression  # built once per prefilter
    for other in (
        "document_id IN ('a') OR 1 = 1",
        "document_id IN ('a'), document_id IN ('b')",
        "title = 'x'",
        "FALSE",
    ):
        assert prefilter_expression(other) == other


async def test_both_legs_keep_to_the_documents_of_the_view(tmp_path: Path) -> None:
    store, vectors = await indexed_store(tmp_path / "kb.lancedb", seed=3)
    visible = {"doc-2", "doc-17", "doc-29"}
    try:
        found = await store.candidates("harbour crane", vectors[0], 30, sql_in("document_id", sorted(visible)))
    finally:
        store.close()
    assert {c.row["document_id"] for c in found} == visible
    assert sum(c.vector_rank is not None for c in found) == 30
    assert sum(c.keyword_rank is not None for c in found) == 30
