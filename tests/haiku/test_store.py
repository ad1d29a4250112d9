"""A database written by haiku.rag 0.101.1, read through our Corpus: every value checked against its raw rows."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import numpy as np
import pytest

from mcp_analysis.config import Settings
from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.errors import DatabaseMismatchError, DocumentNotFoundError, ReadOnlyDatabaseError
from mcp_analysis.ingest.pipeline import Ingestor
from mcp_analysis.ingest.removal import remove_document
from mcp_analysis.store.identify import read_settings_row
from mcp_analysis.store.models import DocumentMeta
from mcp_analysis.store.settings_row import StoredSettings
from tests.conftest import make_settings
from tests.haiku_db import RawDb, copy_fixture, read_raw, tree_hashes

pytestmark = pytest.mark.anyio

LICENSES = "uri LIKE 'corpus/license-%'"


@pytest.fixture(scope="module")
def haiku_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the fixture shared by this module's tests, which only read."""
    return copy_fixture(tmp_path_factory.mktemp("haiku") / "haiku.rag.lancedb")


@pytest.fixture(scope="module")
def haiku_raw(haiku_db: Path) -> RawDb:
    return anyio.run(read_raw, haiku_db)


@pytest.fixture
def haiku_settings_(haiku_db: Path, tmp_path: Path) -> Settings:
    return make_settings(haiku_db, sessions={"dir": tmp_path / "sessions"})


@pytest.fixture
async def hkb(haiku_settings_: Settings) -> AsyncIterator[KnowledgeBase]:
    kb = await KnowledgeBase.open(haiku_settings_)
    yield kb
    await kb.close()


def test_settings_row_tells_haiku_rag_from_ours(haiku_raw: RawDb) -> None:
    theirs = read_settings_row(json.dumps(haiku_raw.settings))
    assert (theirs.origin, theirs.origin_version, theirs.vector_dim) == ("haiku.rag", "0.101.1", 384)
    assert theirs.embedder == "sentence-transformers:sentence-transformers/all-MiniLM-L6-v2"
    ours = read_settings_row(StoredSettings(1, "onnx:all-MiniLM-L6-v2", 384).to_json())
    assert (ours.origin, ours.schema_version, ours.embedder, ours.vector_dim) == (
        "mcp-analysis",
        1,
        "onnx:all-MiniLM-L6-v2",
        384,
    )
    for unknown in ('{"version": 3}', "not json", '{"app": "mcp-analysis", "version": "x"}', "[]"):
        with pytest.raises(DatabaseMismatchError, match=r"neither mcp-analysis nor haiku\.rag wrote"):
            read_settings_row(unknown, "kb")


async def test_documents_and_contents_match_the_stored_rows(hkb: KnowledgeBase, haiku_raw: RawDb) -> None:
    assert hkb.store.read_only and not hkb.store.ids_are_immutable
    assert hkb.store.describe() == "haiku.rag 0.101.1 knowledge base"
    docs = await hkb.corpus().documents()
    assert len(docs) == len(haiku_raw.meta) == 36
    for doc in docs:
        row = haiku_raw.meta[doc.id]
        assert (doc.uri, doc.title, doc.created_at, doc.updated_at) == (
            row["uri"],
            row["title"],
            row["created_at"],
            row["updated_at"],
        )
        assert doc.content_size == len(haiku_raw.content[doc.id].encode("utf-8"))
        assert await hkb.corpus().content(doc.id) == haiku_raw.content[doc.id]


async def test_items_carry_their_rows_and_derived_chunk_ids(hkb: KnowledgeBase, haiku_raw: RawDb) -> None:
    corpus = hkb.corpus()
    total = 0
    covered: set[str] = set()
    for doc_id, raw_items in haiku_raw.items.items():
        lines = [json.loads(line) for line in (await corpus.items_jsonl(doc_id)).splitlines()]
        assert len(lines) == len(raw_items)
        for line, raw in zip(lines, raw_items, strict=True):
            assert (line["position"], line["self_ref"], line["label"], line["text"]) == (
                raw["position"],
                raw["self_ref"],
                raw["label"],
                raw["text"],
            )
            assert line["page_numbers"] == json.loads(raw["page_numbers"])
            assert line["heading_level"] == raw["heading_level"]
            assert line["chunk_ids"] == haiku_raw.chunk_ids_of_item.get((doc_id, raw["self_ref"]), [])
            covered.update(line["chunk_ids"])
        total += len(lines)
    assert total == 1182
    assert covered == set(haiku_raw.chunks)  # every stored chunk is reachable from items.jsonl (citable)


async def test_toc_follows_their_headings(hkb: KnowledgeBase, haiku_raw: RawDb) -> None:
    corpus = hkb.corpus()
    for doc_id, raw_items in haiku_raw.items.items():
        toc = await corpus.toc(doc_id)

        def walk(nodes: list[dict]) -> list[dict]:
            return [n for node in nodes for n in (node, *walk(node["sections"]))]

        nodes = walk(toc["sections"])
        headings = [r for r in raw_items if r["label"] in ("title", "section_header")]
        assert [n["self_ref"] for n in nodes] == [h["self_ref"] for h in headings]
        assert [n["heading"] for n in nodes] == [h["text"] for h in headings]
        doc_chunks = {c for c, row in haiku_raw.chunks.items() if row["document_id"] == doc_id}
        for node in nodes:
            start, end = node["item_range"]
            inside = {
                c
                for r in raw_items[start : end + 1]
                for c in haiku_raw.chunk_ids_of_item.get((doc_id, r["self_ref"]), [])
            }
            assert set(node["chunk_ids"]) == inside and inside <= doc_chunks


async def test_search_returns_their_chunks_with_their_metadata(hkb: KnowledgeBase, haiku_raw: RawDb) -> None:
    results = await hkb.corpus().search("ffi_closure_alloc writable and executable memory", limit=3)
    assert results[0].document_uri == "corpus/The-Closure-API.html"
    for hit in results:
        stored = haiku_raw.chunks[hit.chunk_id]
        meta = haiku_raw.chunk_meta(hit.chunk_id)
        assert hit.document_id == stored["document_id"]
        assert hit.document_title == haiku_raw.meta[hit.document_id]["title"]
        assert hit.headings == (meta["headings"] or [])
        refs = {r["self_ref"] for r in haiku_raw.items[hit.document_id]}
        assert set(meta["doc_item_refs"]) <= set(hit.doc_item_refs) <= refs  # grown with neighbours
        item_text = {r["self_ref"]: r["text"] for r in haiku_raw.items[hit.document_id]}
        assert all(item_text[ref] in hit.content for ref in meta["doc_item_refs"])
    # A chunk's page numbers and labels come from its metadata (this corpus has no pages).
    assert all(hit.page_numbers == [] for hit in results)


async def test_chunk_metadata_gets_item_and_section_ranges(hkb: KnowledgeBase, haiku_raw: RawDb) -> None:
    chunk_id = next(c for c, row in haiku_raw.chunks.items() if len(haiku_raw.chunk_meta(c)["doc_item_refs"]) > 2)
    [(record, _)] = await hkb.corpus().chunks([chunk_id])
    doc_items = haiku_raw.items[record.document_id]
    positions = sorted(
        r["position"] for r in doc_items if r["self_ref"] in haiku_raw.chunk_meta(chunk_id)["doc_item_refs"]
    )
    assert record.item_range == (positions[0], positions[-1])
    start, end = record.section_range
    assert start <= positions[0] <= positions[-1] <= end
    inside = doc_items[start : end + 1]
    headings = [r for r in inside if r["label"] in ("title", "section_header")]
    assert all(h["position"] == start for h in headings[:1])  # a section starts at its heading (or item 0)


async def test_filter_scopes_listing_search_chunks_and_content(hkb: KnowledgeBase, haiku_raw: RawDb) -> None:
    corpus = await hkb.open_corpus(LICENSES)
    expected = {d for d, row in haiku_raw.meta.items() if row["uri"].startswith("corpus/license-")}
    assert {d.id for d in await corpus.documents()} == expected and len(expected) == 11
    for hit in await corpus.search("ffi_closure_alloc closure API", limit=5):
        assert hit.document_id in expected
    outside = next(c for c, row in haiku_raw.chunks.items() if row["document_id"] not in expected)
    assert await corpus.chunks([outside]) == []
    with pytest.raises(DocumentNotFoundError):
        await corpus.content(haiku_raw.chunks[outside]["document_id"])


async def test_keyword_mode_searches_without_an_embedder(haiku_db: Path, tmp_path: Path, haiku_raw: RawDb) -> None:
    settings = make_settings(haiku_db, search={"mode": "keyword"})
    kb = await KnowledgeBase.open(settings)
    try:
        results = await kb.corpus().search("Mozilla", limit=3)
        assert results and kb._embedder is None
        assert all("mozilla" in haiku_raw.chunks[r.chunk_id]["content_fts"].lower() for r in results)
        assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)
        scoped = await (await kb.open_corpus("uri = 'corpus/license-GPL-3.txt'")).search("Mozilla license", limit=3)
        assert scoped and {r.document_uri for r in scoped} == {"corpus/license-GPL-3.txt"}
    finally:
        await kb.close()


async def test_query_vectors_agree_with_the_stored_vectors(hkb: KnowledgeBase, haiku_db: Path) -> None:
    """Our query embedder re-embeds their chunk texts close to their stored vectors (bench/haiku_vectors.py)."""
    import lancedb

    assert hkb.embedder_name == "onnx:all-MiniLM-L6-v2-exact"
    db = await lancedb.connect_async(str(haiku_db))
    rows = await (await db.open_table("chunks")).query().select(["id", "content_fts", "vector"]).to_list()
    rows.sort(key=lambda r: r["id"])
    stored = np.asarray([r["vector"] for r in rows], dtype=np.float32)
    sample = list(range(0, len(rows), 8))  # 39 of 311 chunks, spread over all documents
    embedder = await hkb.embedder()
    ours = await embedder.embed_documents([rows[i]["content_fts"] for i in sample])
    cosines = np.sum(ours * stored[sample], axis=1) / np.linalg.norm(stored[sample], axis=1)
    assert cosines.min() >= 0.998, cosines.min()
    nearest = np.argmax(ours @ stored.T, axis=1)
    assert list(nearest) == sample  # each text's nearest stored vector is its own


async def test_writes_are_refused_and_leave_the_files_untouched(tmp_path: Path, sample_docs_copy: Path) -> None:
    db = copy_fixture(tmp_path / "kb")
    before = tree_hashes(db)
    settings = make_settings(db)
    with pytest.raises(
        ReadOnlyDatabaseError, match=r"haiku\.rag 0\.101\.1 knowledge base; mcp-analysis serves it read-only"
    ):
        await KnowledgeBase.open(settings, create=True)
    kb = await KnowledgeBase.open(settings)
    try:
        some = (await kb.corpus().documents())[0]
        attempts = [
            Ingestor(kb).add([sample_docs_copy]),
            remove_document(kb, some.id),
            kb.store.initialize("onnx:all-MiniLM-L6-v2", 384),
            kb.store.ensure_indexes(),
            kb.store.optimize(),
            kb.store.update_meta(DocumentMeta(**{**some.model_dump(), "title": "changed"})),
            kb.store.delete_document(some.id),
            kb.store.remove_orphans(),
        ]
        for attempt in attempts:
            with pytest.raises(ReadOnlyDatabaseError):
                await attempt
    finally:
        await kb.close()
    assert tree_hashes(db) == before


async def test_documents_rewritten_in_place_are_read_again(tmp_path: Path) -> None:
    """haiku.rag updates a document under the same id; our per-id caches must not serve the old text."""
    import lancedb

    db = copy_fixture(tmp_path / "kb")
    kb = await KnowledgeBase.open(make_settings(db))
    try:
        doc = (await kb.corpus().documents())[0]
        old_text = await kb.corpus().content(doc.id)
        old_items = await kb.corpus().items_jsonl(doc.id)
        # What haiku.rag's update_document does, reduced: new content and items, then a newer meta row.
        writer = await lancedb.connect_async(str(db))
        await (await writer.open_table("documents")).update({"content": "rewritten text"}, where=f"id = '{doc.id}'")
        await (await writer.open_table("document_items")).update(
            {"text": "rewritten item"}, where=f"document_id = '{doc.id}' AND position = 0"
        )
        await (await writer.open_table("document_meta")).update(
            {"updated_at": "2030-01-01T00:00:00+00:00"}, where=f"id = '{doc.id}'"
        )
        writer.close()
        before = kb._version
        for _ in range(100):  # other processes' writes become visible within the read-consistency interval
            if await kb.refresh() != before:
                break
            await anyio.sleep(0.1)
        assert old_text != "rewritten text"
        assert await kb.corpus().content(doc.id) == "rewritten text"
        items = await kb.corpus().items_jsonl(doc.id)
        assert items != old_items and json.loads(items.splitlines()[0])["text"] == "rewritten item"
    finally:
        await kb.close()
