"""Ranking a manual's pages, over nine real pages of libffi's manual.

The page title. Each page's ``<title>`` names the manual ("Multiple ABIs (libffi: the portable foreign function
interface library)"); its first heading, the document's title, mostly does not ("2.4 Multiple
ABIs"), but the overview pages' do ("1 What is libffi?", "2 Using libffi"). A question that
names the manual ("libffi: ...") then gave those overview pages the title signal and none to the
page that answers. Ingest records the page title (metadata ``page_title``), and ranking reads it
in place of the title (search.page_title), so every page of the manual names "libffi" alike.

The nearest chunk. The overview pages also share most of a question's words, so the page whose
one chunk is nearest the question in meaning can rank past the top 5 on words and titles alone;
it takes at least place `search.nearest_place` (rerank.py's `place_nearest`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.ingest.items import TITLE_CHARS, page_title
from mcp_analysis.search.passages import ranking_title
from mcp_analysis.search.settings import SearchSettings
from mcp_analysis.store.models import DocumentMeta
from tests.format_files import convert_file
from tests.search.conftest import build_kb, kb_opener

PAGES = Path(__file__).parent / "data" / "libffi"
MANUAL = "(libffi: the portable foreign function interface library)"

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def manual_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("libffi") / "manual.lancedb"
    return build_kb(db, PAGES, len(list(PAGES.glob("*.html"))))


@pytest.fixture
async def manual(manual_db: Path, tmp_path: Path) -> AsyncIterator[Any]:
    async for open_kb in kb_opener(manual_db, tmp_path):
        yield open_kb


async def pages(kb: KnowledgeBase, question: str) -> list[str]:
    return [r.document_uri.rsplit("/", 1)[-1].removesuffix(".html") for r in await kb.corpus().search(question, 5)]


async def test_ingest_records_the_page_title_where_the_first_heading_says_otherwise(manual: Any) -> None:
    metas = {m.uri.rsplit("/", 1)[-1]: m for m in (await (await manual()).visible(None)).values()}
    abis = metas["Multiple-ABIs.html"]
    assert abis.title == "2.4 Multiple ABIs"  # the first heading stays the title a result shows
    assert abis.metadata["page_title"] == f"Multiple ABIs {MANUAL}"
    assert all(m.metadata["page_title"].endswith(MANUAL) for m in metas.values())


@pytest.mark.parametrize(
    ("question", "page", "within"),
    [
        # The page that answers is past the top 5 without its page title, behind overview pages.
        ("libffi: can I pick between several calling conventions on the same machine?", "Multiple-ABIs", 5),
        # The page that answers comes second, behind "2 Using libffi", without it.
        ("libffi: do I have to lock anything when threads share a call description?", "Thread-Safety", 1),
    ],
)
async def test_a_question_naming_the_manual_finds_the_page_whose_heading_does_not(
    manual: Any, question: str, page: str, within: int
) -> None:
    assert page in (await pages(await manual(), question))[:within]
    assert page not in (await pages(await manual(page_title=False), question))[:within]


def test_a_document_without_a_page_title_is_ranked_by_its_title() -> None:
    meta = DocumentMeta(
        id="d",
        uri="file:///a.html",
        title="2.4 Multiple ABIs",
        metadata={"page_title": "ABIs (x)"},
        created_at="",
        updated_at="",
    )
    assert ranking_title(meta, True) == "ABIs (x)"
    assert ranking_title(meta, False) == "2.4 Multiple ABIs"
    assert ranking_title(meta.model_copy(update={"metadata": {}}), True) == "2.4 Multiple ABIs"
    assert ranking_title(meta.model_copy(update={"metadata": {"page_title": 3}}), True) == "2.4 Multiple ABIs"
    assert ranking_title(None, True) == ""


async def test_the_chunk_nearest_the_question_in_meaning_takes_at_least_the_third_place(manual: Any) -> None:
    question = "libffi: can I pass C structs by value to a function I call through it?"
    kb = await manual()
    vector = await (await kb.embedder()).embed_query(question)
    settings = SearchSettings()
    found = await kb.store.candidates(question, vector, 50, None, ef=settings.ann_ef, refine_factor=4)
    nearest = max(found, key=lambda c: c.cosine or 0.0)
    assert nearest.row["document_id"] in {d for d, m in (await kb.visible(None)).items() if "Structures" in m.uri}
    assert (await pages(kb, question)).index("Structures") == 2
    assert "Structures" not in await pages(await manual(nearest_place=0), question)  # words and titles bury it


def test_a_huge_or_ragged_page_title_is_one_line_of_at_most_300_characters(tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    ragged = "Structures\n\t (libffi " + "manual " * 20_000 + ")"
    page.write_text(f"<html><head><title>{ragged}</title></head><body><h1>2.3.2 Structures</h1><p>x</p></body></html>")
    named = page_title(convert_file(page).document)
    assert named is not None and named.startswith("Structures (libffi manual manual")
    assert len(named) == TITLE_CHARS and "\n" not in named and "  " not in named
    page.write_text("<html><head><title> </title></head><body><h1>Only a heading</h1><p>x</p></body></html>")
    assert page_title(convert_file(page).document) is None
