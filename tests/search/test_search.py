from __future__ import annotations

import pytest

from mcp_analysis.config import load_settings
from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.errors import AnalysisError

pytestmark = pytest.mark.anyio


def _name(uri: str) -> str:
    return uri.rsplit("/", 1)[-1]


async def test_exact_terms_and_meaning_both_find_documents(kb: KnowledgeBase) -> None:
    corpus = kb.corpus()
    exact = await corpus.search("CVE-2025-30412", limit=3)
    assert _name(exact[0].document_uri) in {"advisory-2025-02-navcore-firmware.html", "annual-security-review-2025.md"}
    assert "CVE-2025-30412" in exact[0].content
    semantic = await corpus.search("how many shipping companies answered the questionnaire", limit=3)
    assert _name(semantic[0].document_uri) == "report-a-fleet-operator-survey.pdf"


async def test_result_fields_and_refs_match_items(kb: KnowledgeBase) -> None:
    corpus = kb.corpus()
    results = await corpus.search("third quarter revenue by segment", limit=3)
    assert [r.rank for r in results] == list(range(1, len(results) + 1))
    assert all(results[i].score >= results[i + 1].score for i in range(len(results) - 1))
    top = results[0]
    assert _name(top.document_uri) == "q3-2025-financial-report.pdf"
    assert top.page_numbers == [2]
    assert top.headings[0].startswith("Halvorsen Marine Systems")
    assert "table" in top.labels
    refs = {i.self_ref for i in await corpus.items(top.document_id)}
    assert set(top.doc_item_refs) <= refs
    assert top.chunk_id in {c for i in await corpus.items(top.document_id) for c in i.chunk_ids}


async def test_context_expansion_grows_to_the_section_and_respects_budget(kb: KnowledgeBase) -> None:
    corpus = kb.corpus()
    results = await corpus.search("Priorities for 2026 hardware-backed key storage red-team", limit=1)
    assert "red-team exercise" in results[0].content
    # The whole small section comes along, heading included.
    assert "## Priorities for 2026" in results[0].content
    assert "hardware-backed key storage" in results[0].content

    small = load_settings(db=kb.settings.db, search={"max_context_chars": 300})
    tight = await KnowledgeBase.open(small)
    limited = await tight.corpus().search("Priorities for 2026 hardware-backed key storage red-team", limit=1)
    assert len(limited[0].content) <= 600  # the hit itself plus nothing that breaks the budget
    assert len(limited[0].content) <= len(results[0].content)
    await tight.close()


async def test_overlapping_hits_of_one_document_are_merged(kb: KnowledgeBase) -> None:
    results = await kb.corpus().search("Report B port authority interviews key findings AIS", limit=10)
    keys = [(r.document_id, tuple(r.doc_item_refs)) for r in results]
    assert len(keys) == len(set(keys))
    for a in results:
        for b in results:
            if a is not b and a.document_id == b.document_id:
                assert not set(a.doc_item_refs) & set(b.doc_item_refs)


async def test_filter_is_applied_before_ranking(kb: KnowledgeBase) -> None:
    advisories = await kb.open_corpus("uri LIKE '%advisory%'")
    results = await advisories.search("quarterly revenue", limit=5)
    assert results, "filtered search should still return the best matches inside the filter"
    assert all("advisory" in r.document_uri for r in results)
    nothing = await kb.open_corpus("title = 'no such title'")
    assert await nothing.search("revenue", limit=5) == []


async def test_limits_and_bad_queries(kb: KnowledgeBase) -> None:
    corpus = kb.corpus()
    assert len(await corpus.search("security", limit=2)) == 2
    assert len(await corpus.search("security")) == 5  # default limit
    with pytest.raises(AnalysisError, match="non-empty"):
        await corpus.search("   ")
    with pytest.raises(AnalysisError, match="between 1 and"):
        await corpus.search("x", limit=0)
    # Full-text syntax characters in a query are just text: the full-text leg still finds the word.
    hits = await corpus.search('"phishing (campaign AND OR NOT *', limit=2)
    assert len(hits) == 2 and _name(hits[0].document_uri) == "advisory-2025-04-phishing.txt"
    assert hits[0].score > 1 / 61  # RRF (k=60): only a hit both legs rank first scores above 1/61
