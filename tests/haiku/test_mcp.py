"""The haiku.rag 0.101.1 fixture served over real MCP transports: all four tools, resources and
execute_code answer with what haiku.rag stored, and the database is byte-identical afterwards."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import lancedb
import pytest
from mcp import Client

from tests.haiku_db import FIXTURE, RawDb, copy_fixture, read_raw, tree_hashes
from tests.mcp_helpers import http_server, stdio_params, text

pytestmark = pytest.mark.anyio

LICENSES = "uri LIKE 'corpus/license-%'"
STATS = (
    "from pathlib import Path\n"
    "import json\n"
    "stats = {}\n"
    "for d in Path('/documents').iterdir():\n"
    "    meta = json.loads((d / 'metadata.json').read_text())\n"
    "    items = [json.loads(line) for line in (d / 'items.jsonl').read_text().splitlines()]\n"
    "    toc = json.loads((d / 'toc.json').read_text())\n"
    "    stats[meta['id']] = [meta['uri'], len((d / 'content.txt').read_text()), len(items), len(toc['sections'])]\n"
    "len(stats)"
)

SANDBOX_SEARCH = (
    "r = await search('Mozilla Public License', limit=3)\n"
    "print(json.dumps([{k: h[k] for k in ('chunk_id', 'document_id', 'document_uri', 'doc_item_refs')} for h in r]))"
)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, RawDb]:
    db = copy_fixture(tmp_path_factory.mktemp("haiku-mcp") / "haiku.rag.lancedb")
    return db, anyio.run(read_raw, db)


def env_for(tmp_path: Path) -> dict[str, str]:
    return {"XDG_DATA_HOME": str(tmp_path / "data")}  # session files live here, never in the database


async def test_stdio_client_gets_what_haiku_rag_stored(served: tuple[Path, RawDb], tmp_path: Path) -> None:
    db, raw = served
    # Started as a haiku.rag user's host config starts haiku.rag's server (`serve --mcp --stdio`).
    async with Client(stdio_params(db, "--mcp", "--stdio", env=env_for(tmp_path))) as client:
        listed = (await client.call_tool("list_documents", {"limit": 1000})).structured_content
        assert listed["total"] == 36
        assert {d["id"]: (d["uri"], d["title"]) for d in listed["documents"]} == {
            i: (r["uri"], r["title"]) for i, r in raw.meta.items()
        }

        found = await client.call_tool(
            "search", {"query": "ffi_closure_alloc writable and executable memory", "limit": 3}
        )
        assert not found.is_error, text(found)
        hits = found.structured_content["results"]
        assert raw.meta[hits[0]["document_id"]]["uri"] == "corpus/The-Closure-API.html"
        for hit in hits:
            stored = raw.chunks[hit["chunk_id"]]
            assert hit["document_id"] == stored["document_id"]
            assert hit["headings"] == (raw.chunk_meta(hit["chunk_id"])["headings"] or [])

        first = (await client.call_tool("execute_code", {"code": STATS})).structured_content
        assert first["success"] and first["value"] == "36", first
        dumped = (await client.call_tool("execute_code", {"code": "print(json.dumps(stats))"})).structured_content
        stats = json.loads(dumped["stdout"])  # `stats` survived between the two calls
        for doc_id, (uri, chars, items, _sections) in stats.items():
            assert (uri, chars, items) == (raw.meta[doc_id]["uri"], len(raw.content[doc_id]), len(raw.items[doc_id]))

        in_sandbox = await client.call_tool("execute_code", {"code": SANDBOX_SEARCH})
        sandbox_hits = json.loads(in_sandbox.structured_content["stdout"])
        assert sandbox_hits and {h["chunk_id"] for h in sandbox_hits} <= set(raw.chunks)
        first_hit = sandbox_hits[0]
        assert "MPL" in raw.meta[raw.chunks[first_hit["chunk_id"]]["document_id"]]["uri"]
        for hit in sandbox_hits:  # the sandbox keeps every field: uri and haiku.rag's doc_item_refs
            assert hit["document_uri"] == raw.meta[hit["document_id"]]["uri"]
            assert set(raw.chunk_meta(hit["chunk_id"])["doc_item_refs"]) <= set(hit["doc_item_refs"])

        # A chunk id read from items.jsonl (never shown by a search) is citable, like in haiku.rag.
        other_doc = next(d for d in raw.items if d not in {h["document_id"] for h in hits})
        from_items = next(
            raw.chunk_ids_of_item[(other_doc, r["self_ref"])][0]
            for r in raw.items[other_doc]
            if (other_doc, r["self_ref"]) in raw.chunk_ids_of_item
        )
        cited = await client.call_tool("cite", {"chunk_ids": [hits[0]["chunk_id"], from_items]})
        assert not cited.is_error, text(cited)
        citations = cited.structured_content["citations"]
        assert [c["chunk_id"] for c in citations] == [hits[0]["chunk_id"], from_items]
        assert [c["document_title"] for c in citations] == [
            raw.meta[raw.chunks[c]["document_id"]]["title"] for c in (hits[0]["chunk_id"], from_items)
        ]

        resources = (await client.list_resources()).resources
        assert len(resources) == 36 * 5  # metadata, content, items, toc, tables
        doc_id = hits[0]["document_id"]
        content = await client.read_resource(f"documents:///{doc_id}/content.txt")
        assert content.contents[0].text == raw.content[doc_id]
        items = await client.read_resource(f"documents:///{doc_id}/items.jsonl")
        lines = [json.loads(line) for line in items.contents[0].text.splitlines()]
        assert [(i["self_ref"], i["text"]) for i in lines] == [(r["self_ref"], r["text"]) for r in raw.items[doc_id]]
        meta = json.loads((await client.read_resource(f"documents:///{doc_id}/metadata.json")).contents[0].text)
        assert (meta["uri"], meta["created_at"]) == (raw.meta[doc_id]["uri"], raw.meta[doc_id]["created_at"])
    assert tree_hashes(db) == tree_hashes(FIXTURE)


async def test_http_server_with_a_filter_scopes_every_surface(served: tuple[Path, RawDb], tmp_path: Path) -> None:
    db, raw = served
    licences = {d for d, r in raw.meta.items() if r["uri"].startswith("corpus/license-")}
    outside = next(d for d in raw.meta if d not in licences)
    with http_server(db, "--filter", LICENSES, log_dir=tmp_path, env=env_for(tmp_path)) as server:
        async with server.client() as client:
            listed = (await client.call_tool("list_documents", {})).structured_content
            assert {d["id"] for d in listed["documents"]} == licences
            hits = (
                await client.call_tool("search", {"query": "ffi_closure_alloc closure", "limit": 5})
            ).structured_content
            assert hits["results"] and {h["document_id"] for h in hits["results"]} <= licences
            seen = await client.call_tool("execute_code", {"code": "import os\nlen(os.listdir('/documents'))"})
            assert seen.structured_content["value"] == str(len(licences))
            hidden = next(c for c, r in raw.chunks.items() if r["document_id"] == outside)
            refused = await client.call_tool("cite", {"chunk_ids": [hidden]})
            assert refused.is_error and "could be resolved" in text(refused)
            assert len((await client.list_resources()).resources) == 5 * len(licences)
            with pytest.raises(Exception, match="outside your filter"):
                await client.read_resource(f"documents:///{outside}/content.txt")
    assert tree_hashes(db) == tree_hashes(FIXTURE)


HEADING = "David Mandelberg"  # a section heading of users-and-groups.html, over its copyright lines


async def with_heading_chunk(db: Path) -> tuple[str, str]:
    """Give a haiku.rag database a chunk that is only a heading, in haiku.rag's row layout (its
    chunker can write one where a heading's section starts a new chunk): order shifted, no ranges.
    The heading chunk's id, and the id of the chunk after it in its section."""
    con = lancedb.connect(str(db))
    doc_id = next(r["id"] for r in con.open_table("document_meta").to_arrow().to_pylist() if "users-and" in r["uri"])
    where = f"document_id = '{doc_id}'"
    item = next(r for r in con.open_table("document_items").search().where(where).to_list() if r["text"] == HEADING)
    chunks = con.open_table("chunks")
    rows = sorted(chunks.search().where(where).to_list(), key=lambda r: r["order"])
    follower = next(r for r in rows if HEADING in json.loads(r["metadata"])["headings"])
    headings = json.loads(follower["metadata"])["headings"]
    chunks.update(where=f"{where} AND `order` >= {follower['order']}", values_sql={"order": "`order` + 1"})
    chunk_id = "heading-only-chunk"
    metadata = {"doc_item_refs": [item["self_ref"]], "headings": headings, "labels": [item["label"]]}
    chunks.add(
        [
            {
                **{k: v for k, v in follower.items() if k not in ("_distance", "_score")},
                "id": chunk_id,
                "content": HEADING,
                "content_fts": "\n".join(headings),
                "metadata": json.dumps({**json.loads(follower["metadata"]), **metadata}),
                "order": follower["order"],
                "vector": follower["vector"],
            }
        ]
    )
    chunks.optimize()  # the full-text index takes in the new row
    return chunk_id, follower["id"]


async def test_a_haiku_rag_heading_only_chunk_is_never_a_hit(tmp_path: Path) -> None:
    db = copy_fixture(tmp_path / "haiku.rag.lancedb")
    heading, follower = await with_heading_chunk(db)
    async with Client(stdio_params(db, env=env_for(tmp_path))) as client:
        found = await client.call_tool("search", {"query": HEADING, "limit": 5})
        assert not found.is_error, text(found)
    hits = found.structured_content["results"]
    assert heading not in [h["chunk_id"] for h in hits]
    first = hits[0]
    assert first["chunk_id"] == follower  # the section the heading titles, under its title
    assert first["headings"][-1] == HEADING and "Copyright © 2005 David Mandelberg" in first["content"]
