"""A heading is never a hit on its own: the section it titles is.

The sample's workbook has a sheet per section: a heading over a table. "revenue by region 2025"
used to return the chunk `Revenue by region` (the heading alone) as hit 1, the table third.
The chunker now joins such headings to what follows them (new knowledge bases); knowledge bases
written before hold heading-only chunks, which the store joins to their section at read time.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import lancedb
import pytest
from mcp import Client

from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.ingest.chunker import chunk_items
from mcp_analysis.ingest.items import ItemDraft
from mcp_analysis.store.filters import sql_quote
from tests.conftest import make_settings
from tests.mcp_helpers import stdio_params

pytestmark = pytest.mark.anyio

QUERY = "revenue by region 2025"


def own_words(hit: dict[str, Any]) -> int:
    """Words of a hit's text besides its headings (a bare heading has almost none)."""
    headings = {h.strip() for h in hit["headings"]}
    lines = [ln for ln in hit["content"].splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    return len(re.findall(r"\w+", " ".join(ln for ln in lines if ln.strip() not in headings)))


async def search(db: Path, query: str) -> list[dict[str, Any]]:
    async with Client(stdio_params(db)) as client:
        result = await client.call_tool("search", {"query": query, "limit": 5})
        assert not result.is_error
        return result.structured_content["results"]


def assert_the_table_answers(hits: list[dict[str, Any]]) -> None:
    assert [h["content"] for h in hits if own_words(h) <= 3] == []
    first = hits[0]
    assert "revenue by region, 2025" in first["content"].lower()
    assert first["headings"][-1] == "Revenue by region"  # the section's title is the hit's heading path


async def test_the_table_answers_not_its_heading(sample_db: Path) -> None:
    assert_the_table_answers(await search(sample_db, QUERY))


async def write_heading_chunk(db: Path, uri_part: str, heading: str) -> str:
    """Give `db` the heading-only chunk an ingest before this change wrote (a copy of its row layout)."""
    con = lancedb.connect(str(db))
    doc_id = next(r["id"] for r in con.open_table("document_meta").to_arrow().to_pylist() if uri_part in r["uri"])
    where = f"document_id = {sql_quote(doc_id)}"
    item = next(r for r in con.open_table("document_items").search().where(where).to_list() if r["text"] == heading)
    chunks = con.open_table("chunks")
    rows = sorted(chunks.search().where(where).to_list(), key=lambda r: r["order"])
    follower = next(r for r in rows if json.loads(r["metadata"])["item_range"][0] > item["position"])
    meta = json.loads(follower["metadata"])
    chunks.update(where=f"{where} AND `order` >= {follower['order']}", values_sql={"order": "`order` + 1"})
    text = "\n".join(meta["headings"])
    kb = await KnowledgeBase.open(make_settings(db))
    vector = (await (await kb.embedder()).embed_documents([text]))[0]
    await kb.close()
    chunk_id = "legacy-heading-chunk"
    chunks.add(
        [
            {
                "id": chunk_id,
                "document_id": doc_id,
                "content": heading,
                "content_fts": text,
                "metadata": json.dumps(
                    {
                        **meta,
                        "doc_item_refs": [item["self_ref"]],
                        "labels": [item["label"]],
                        "item_range": [item["position"], item["position"]],
                        "section_range": [item["position"], meta["section_range"][1]],
                    }
                ),
                "order": follower["order"],
                "vector": vector.tolist(),
            }
        ]
    )
    return chunk_id


async def test_heading_only_chunks_of_older_knowledge_bases_join_their_section(sample_db: Path, tmp_path: Path) -> None:
    db = tmp_path / "older.lancedb"
    shutil.copytree(sample_db, db)
    heading = await write_heading_chunk(db, "revenue-and-support-2025", "Revenue by region")
    hits = await search(db, QUERY)
    assert heading not in [h["chunk_id"] for h in hits]
    assert_the_table_answers(hits)


def test_the_chunker_never_makes_a_chunk_of_headings_alone() -> None:
    items = [
        ItemDraft(0, "#/texts/0", "title", "Users and Groups", heading_level=1),
        ItemDraft(1, "#/texts/1", "section_header", "Static ids", heading_level=2),
        ItemDraft(2, "#/texts/2", "text", "The ids 0-99 are allocated globally."),
        ItemDraft(3, "#/texts/3", "section_header", "Maintainers", heading_level=2),
        ItemDraft(4, "#/texts/4", "section_header", "Joey Hess", heading_level=3),
        ItemDraft(5, "#/texts/5", "text", "Wrote the first version. " * 20),
        ItemDraft(6, "#/texts/6", "section_header", "Licence", heading_level=2),
        ItemDraft(7, "#/texts/7", "text", "Permission is granted. " * 60),  # split in pieces
        ItemDraft(8, "#/texts/8", "section_header", "Appendix", heading_level=2),  # titles nothing
    ]
    chunks = chunk_items(items, lambda texts: [len(t.split()) for t in texts], max_tokens=100)
    assert [c.labels for c in chunks if set(c.labels) <= {"title", "section_header"}] == []
    assert chunks[0].content.startswith("Users and Groups\n\nStatic ids\n\nThe ids")
    assert chunks[0].section_range == (0, 8)
    joey = next(c for c in chunks if "Wrote" in c.content)
    assert joey.headings == ["Users and Groups", "Maintainers", "Joey Hess"]
    assert joey.content.startswith("Maintainers\n\nJoey Hess\n\nWrote")
    pieces = [c for c in chunks if "Permission" in c.content]
    assert len(pieces) > 1 and all(c.headings == ["Users and Groups", "Licence"] for c in pieces)
    assert "Appendix" not in " ".join(c.content for c in chunks)


def test_a_run_of_headings_never_makes_a_chunk_past_the_budget() -> None:
    """400 empty sections, then one paragraph: the chunk stays within max_tokens (the embedder would
    cut it, leaving most of it out of vector search); the open sections stay its heading path."""
    items = [
        ItemDraft(n, f"#/texts/{n}", "section_header", f"Part {n} of the index", heading_level=2) for n in range(400)
    ]
    items.append(ItemDraft(400, "#/texts/400", "text", "The only paragraph: the harbour dues rise in May."))
    chunks = chunk_items(items, lambda texts: [len(t.split()) for t in texts], max_tokens=40)
    assert len(chunks) == 1
    assert len(chunks[0].content.split()) <= 40
    assert chunks[0].content.endswith("The only paragraph: the harbour dues rise in May.")
    assert chunks[0].headings == ["Part 399 of the index"]
