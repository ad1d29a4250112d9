"""The within-document fetch's prefilter: the named documents the view passes, never one it hides."""

from __future__ import annotations

import pytest

from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.store.candidates import VisibleDocuments
from tests.store.test_candidates import ANN

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("form", ["in", "not in"])
async def test_a_document_the_view_hides_is_never_fetched_even_when_named(kb: KnowledgeBase, form: str) -> None:
    advisories = {d.id for d in await (await kb.open_corpus("uri LIKE '%advisory%'")).documents()}
    everything = {d.id for d in await kb.corpus().documents()}
    hidden, shown = sorted(everything - advisories)[0], sorted(advisories)[0]
    # A view passing most documents carries the few it hides (its legs run as NOT IN those).
    view = VisibleDocuments.of(advisories, hidden=everything - advisories if form == "not in" else None)
    query = "quarterly revenue by region total"  # both legs prefer the financial reports, outside the view
    vector = await (await kb.embedder()).embed_query(query)
    found = await kb.store.candidates(query, vector, 50, VisibleDocuments.within(view, [hidden, shown]), **ANN)
    assert found and {c.row["document_id"] for c in found} == {shown}
    assert await kb.store.candidates(query, vector, 50, VisibleDocuments.within(view, [hidden]), **ANN) == []
    # Without a view every named document is read, and only those.
    both = await kb.store.candidates(query, vector, 50, VisibleDocuments.within(None, [hidden, shown]), **ANN)
    assert {c.row["document_id"] for c in both} == {hidden, shown}
