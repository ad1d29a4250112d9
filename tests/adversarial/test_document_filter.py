"""A session's document filter holds on every path: hidden documents neither appear nor take the
places of visible ones, whatever the search mode.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.errors import CitationError
from mcp_analysis.session.analysis import AnalysisSession
from tests.conftest import make_settings

pytestmark = pytest.mark.anyio


async def test_keyword_mode_keeps_the_filter_on_every_path(sample_db: Path) -> None:
    """search.mode: keyword (full-text only): the filter is a prefilter for the tool, the sandbox's
    search() and cite, so hidden documents neither appear nor take the slots of visible ones."""
    kb = await KnowledgeBase.open(make_settings(sample_db, search={"mode": "keyword"}))
    everything = await kb.corpus().search("security", 10)
    hidden = [hit for hit in everything if "advisory" not in hit.document_uri]
    assert hidden and "advisory" not in everything[0].document_uri  # the best match is hidden below
    async with AnalysisSession(kb, filter="uri LIKE '%advisory%'") as session:
        top = await session.search("security", 1)
        assert len(top) == 1 and "advisory" in top[0].document_uri
        inside = await session.execute(
            "hits = await search('security revenue quarterly', limit=20)\n"
            "(len(hits) > 0, all('advisory' in h.document_uri for h in hits), len(await list_documents(0, 100)))"
        )
        assert inside.value == "(True, True, 4)", inside.error
        with pytest.raises(CitationError, match="could be resolved"):
            await session.cite([hidden[0].chunk_id])
    await kb.close()
