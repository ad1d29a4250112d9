"""The first documents' own chunks fetched again (search/leading.py), over real licence texts."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_analysis.search.settings import SearchSettings
from tests.search.test_passages import CLAUSE_WEIGHT, shown, squash

ANN = {"ef": SearchSettings().ann_ef, "refine_factor": SearchSettings().ann_refine_factor}  # as a search sends them

pytestmark = pytest.mark.anyio


async def test_a_clause_neither_leg_fetched_is_fetched_within_its_document_and_shown(licences: Any) -> None:
    question = "GPL 3: is what my program prints out covered by the licence?"
    answer = "only if the output, given its content, constitutes a covered work"
    kb = await licences(candidates=10, passage_candidates=16, weight_passage=CLAUSE_WEIGHT)
    vector = await (await kb.embedder()).embed_query(question)
    fetched = await kb.store.candidates(question, vector, 10, None, **ANN)
    assert not any(answer in squash(c.row["content"]) for c in fetched), "neither leg's 10 best hold the clause"
    results = await kb.corpus().search(question, 5)
    assert results[0].document_title == "license-GPL-3"
    assert any(answer in excerpt for excerpt in shown(results, question, "license-GPL-3"))
    # Without the fetch (the default) the same document ranks first, but the clause is never a candidate.
    without = await (await licences(candidates=10, weight_passage=CLAUSE_WEIGHT)).corpus().search(question, 5)
    assert without[0].document_title == "license-GPL-3"
    assert not any(answer in excerpt for excerpt in shown(without, question, "license-GPL-3"))
