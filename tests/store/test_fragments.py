"""Rows written as Lance fragments elsewhere (a Ray ingest's workers) and committed by the store:
real LanceDB and Lance on disk. Written but not committed, nothing of them is visible or counted;
committed, the document is whole; committed again under its uri, the old rows go."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from mcp_analysis.store.database import Store
from mcp_analysis.store.fragments import write_fragments
from mcp_analysis.store.models import DocumentMeta
from mcp_analysis.store.writes import DocumentRows

pytestmark = pytest.mark.anyio
pytest.importorskip("lance", reason="the fragment route comes with the extra mcp-analysis[ray]")

TABLES = ("documents", "document_items", "document_tables", "chunks")


def rows(uri: str, text: str) -> DocumentRows:
    doc_id = str(uuid.uuid4())
    meta = DocumentMeta(id=doc_id, uri=uri, title=text, created_at="2026-01-01", updated_at="2026-01-01")
    chunk = {
        "id": str(uuid.uuid4()),
        "document_id": doc_id,
        "content": text,
        "content_fts": text,
        "metadata": "{}",
        "order": 0,
        "vector": [0.5, 0.5, 0.5, 0.5],
    }
    return DocumentRows(meta, {"id": doc_id, "content": text, "docling_document": b"{}"}, [], [chunk])


async def counts(store: Store) -> dict[str, int]:
    return {name: await store.tables[name].count_rows() for name in TABLES}


async def test_fragments_are_seen_only_once_their_batch_is_committed(tmp_path: Path) -> None:
    store = await Store.open(tmp_path / "kb.lancedb", create=True)
    await store.initialize("test-embedder", 4)
    first = rows("file:///docs/log.md", "The pilot boarded at dawn.")
    targets = await store.fragment_targets()
    fragments = write_fragments([first], targets)
    assert set(fragments) == {"documents", "chunks"}
    before = await counts(store)
    reopened = await Store.open(tmp_path / "kb.lancedb")  # another process's view, as after a killed driver
    assert await counts(reopened) == before == dict.fromkeys(TABLES, 0) and await reopened.all_meta() == []

    await store.commit_fragments([first.meta], fragments, targets)
    assert [m.id for m in await store.all_meta()] == [first.meta.id]
    assert await counts(store) == {"documents": 1, "document_items": 0, "document_tables": 0, "chunks": 1}
    assert await store.orphan_ids() == set()

    second = rows("file:///docs/log.md", "The pilot boarded at noon.")  # the same file, changed
    targets = await store.fragment_targets()
    replaced = await store.commit_fragments([second.meta], write_fragments([second], targets), targets)
    assert replaced == [first.meta.id] and [m.id for m in await store.all_meta()] == [second.meta.id]
    chunks = await store.tables["chunks"].query().to_arrow()
    assert chunks.column("content").to_pylist() == ["The pilot boarded at noon."]


async def test_a_jobs_documents_moves_and_metadata_are_one_commit(tmp_path: Path) -> None:
    """A Ray job's end: a new document, a changed one, two moved ones (the old uri of one holds a
    new file now), and new metadata for an unchanged one, all visible at once (one version of
    document_meta); the moved documents keep their rows, the replaced one's go."""
    store = await Store.open(tmp_path / "kb.lancedb", create=True)
    await store.initialize("test-embedder", 4)
    names = ("changed", "moved", "gone", "kept")
    changed, moved, gone, kept = (rows(f"file:///docs/{n}.md", f"Text of {n}.") for n in names)
    await store.write_documents([changed, moved, gone, kept])
    meta = store.tables["document_meta"]
    before = await meta.version()

    new_changed = rows("file:///docs/changed.md", "Changed text.")
    at_old_place = rows("file:///docs/moved.md", "Another file where the moved one was.")
    added = rows("file:///docs/new.md", "A new file.")
    relocated = [m.meta.model_copy(update={"uri": m.meta.uri.replace("docs/", "docs/old/")}) for m in (moved, gone)]
    retitled = kept.meta.model_copy(update={"title": "Kept, retitled"})
    batch = [new_changed, at_old_place, added]
    targets = await store.fragment_targets()
    replaced = await store.commit_fragments(
        [b.meta for b in batch], write_fragments(batch, targets), targets, [*relocated, retitled]
    )

    assert await meta.version() == before + 1  # one commit point
    assert replaced == [changed.meta.id]
    by_uri = {m.uri: (m.id, m.title) for m in await store.all_meta()}
    assert by_uri == {
        "file:///docs/changed.md": (new_changed.meta.id, new_changed.meta.title),
        "file:///docs/moved.md": (at_old_place.meta.id, at_old_place.meta.title),
        "file:///docs/old/moved.md": (moved.meta.id, moved.meta.title),
        "file:///docs/old/gone.md": (gone.meta.id, gone.meta.title),
        "file:///docs/new.md": (added.meta.id, added.meta.title),
        "file:///docs/kept.md": (kept.meta.id, "Kept, retitled"),
    }
    chunks = await store.tables["chunks"].query().to_arrow()
    assert sorted(chunks.column("document_id").to_pylist()) == sorted(id_ for id_, _ in by_uri.values())
    assert await store.orphan_ids() == set()
