from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import lancedb
import pytest

from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.ingest.pipeline import Ingestor, remove_document
from tests.conftest import REPO, make_settings
from tests.docs_factory import write_all, write_markdown

pytestmark = pytest.mark.anyio


async def _fresh_kb(tmp_path: Path, **overrides: object) -> KnowledgeBase:
    return await KnowledgeBase.open(make_settings(tmp_path / "kb.lancedb", **overrides), create=True)


async def test_every_format_yields_docling_items(tmp_path: Path) -> None:
    files = write_all(tmp_path / "docs")
    kb = await _fresh_kb(tmp_path)
    report = await Ingestor(kb).add([tmp_path / "docs"])
    assert len(report.added) == 6, report.skipped
    corpus = kb.corpus()
    by_format = {d.metadata["format"]: d for d in await corpus.documents()}
    assert set(by_format) == set(files)

    def labels(items: list) -> set[str]:
        return {i.label for i in items}

    md = await corpus.items(by_format["markdown"].id)
    assert {"title", "section_header", "table", "list_item", "code"} <= labels(md)
    inline = next(i for i in md if "pilot boarded" in i.text)
    assert inline.text == "The pilot boarded at dawn and used VHF 12."  # one paragraph, not 3 pieces
    assert inline.self_ref.startswith("#/groups/")
    table = next(i for i in md if i.label == "table")
    assert table.self_ref == "#/tables/0" and "| Mon" in table.text

    html = await corpus.items(by_format["html"].id)
    assert {"section_header", "table", "list_item"} <= labels(html)
    assert by_format["html"].title == "Berth Plan"

    pdf = await corpus.items(by_format["pdf"].id)
    assert by_format["pdf"].title == "Dredging Survey"
    assert {p for i in pdf for p in i.page_numbers} == {1, 2}
    section = next(i for i in pdf if i.text == "Section 2")
    assert section.label == "section_header" and section.page_numbers == [2]

    docx = await corpus.items(by_format["docx"].id)
    assert by_format["docx"].title == "Crew Roster"
    assert {"title", "section_header", "table", "list_item"} <= labels(docx)

    text = await corpus.items(by_format["text"].id)
    assert by_format["text"].title == "Notice to Mariners"
    assert [i.label for i in text] == ["title", "text", "text"]

    code = await corpus.items(by_format["code"].id)
    assert "code" in labels(code) and by_format["code"].title == "tide.py"

    # Chunks reference item self_refs, and items point back at their chunks.
    for meta in await corpus.documents():
        items = await corpus.items(meta.id)
        refs = {i.self_ref for i in items}
        chunk_rows = await kb.store.chunks(f"document_id = '{meta.id}'")
        assert chunk_rows, meta.title
        for row in chunk_rows:
            import json

            assert set(json.loads(row["metadata"])["doc_item_refs"]) <= refs
        assert {c for i in items for c in i.chunk_ids} == {r["id"] for r in chunk_rows}
    await kb.close()


async def test_readd_is_idempotent_and_changes_replace(tmp_path: Path) -> None:
    doc = write_markdown(tmp_path / "log.md")
    kb = await _fresh_kb(tmp_path)
    first = await Ingestor(kb).add([doc], metadata={"team": "ops"})
    assert len(first.added) == 1
    old = (await kb.corpus().documents())[0]
    counts = await kb.store.counts()

    again = await Ingestor(kb).add([doc], metadata={"team": "ops"})
    assert again.unchanged == [doc.as_uri()] and not again.added and not again.replaced
    assert await kb.store.counts() == counts

    retitled = await Ingestor(kb).add([doc], title="Renamed Log")
    assert retitled.metadata_updated == [doc.as_uri()]
    meta = (await kb.corpus().documents())[0]
    assert meta.id == old.id and meta.title == "Renamed Log" and meta.metadata["team"] == "ops"

    doc.write_text("# Harbour Log\n\nCompletely new content about icebreakers.\n")
    changed = await Ingestor(kb).add([doc])
    assert changed.replaced == [doc.as_uri()]
    docs = await kb.corpus().documents()
    assert len(docs) == 1 and docs[0].id != old.id
    assert docs[0].created_at == old.created_at
    assert "icebreakers" in await kb.corpus().content(docs[0].id)
    assert await kb.store.chunks(f"document_id = '{old.id}'") == []
    assert await kb.store.orphan_ids() == set()

    removed = await remove_document(kb, str(doc))
    assert removed.id == docs[0].id
    assert await kb.corpus().count() == 0
    assert (await kb.store.counts())["chunks"] == 0
    await kb.close()


async def test_bad_files_are_reported_and_the_rest_goes_in(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    write_markdown(docs / "good.md")
    (docs / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 50)
    (docs / "broken.pdf").write_bytes(b"%PDF-1.4 this is not really a pdf")
    (docs / "binary.txt").write_bytes(b"abc\x00\x01\x02")
    (docs / "empty.md").write_text("   \n")
    (docs / ".hidden.md").write_text("# secret\n")
    kb = await _fresh_kb(tmp_path)
    report = await Ingestor(kb).add([docs, tmp_path / "does-not-exist.md"])
    assert [Path(u).name for u in report.added] == ["good.md"]
    skipped = {Path(p).name: reason for p, reason in report.skipped}
    assert set(skipped) == {"image.png", "broken.pdf", "binary.txt", "empty.md", "does-not-exist.md"}
    assert "unsupported format" in skipped["image.png"]
    assert "PDF" in skipped["broken.pdf"]
    assert "binary" in skipped["binary.txt"]
    assert "no text" in skipped["empty.md"]
    assert "does not exist" in skipped["does-not-exist.md"]
    await kb.close()


def _count(db: Path, table: str) -> int:
    async def go() -> int:
        conn = await lancedb.connect_async(str(db), read_consistency_interval=None)
        names = (await conn.list_tables()).tables
        if table not in names:
            return 0
        return await (await conn.open_table(table)).count_rows()

    return anyio.run(go)


def test_killed_ingest_leaves_no_half_document_and_rerun_completes(tmp_path: Path) -> None:
    docs = tmp_path / "many"
    docs.mkdir()
    paragraph = "Section {n} describes berth {n} with depth, length, fenders and bollards in detail. " * 12
    for n in range(120):
        body = "\n\n".join(f"## Part {k}\n\n" + paragraph.format(n=f"{n}-{k}") for k in range(4))
        (docs / f"doc{n:03d}.md").write_text(f"# Document {n}\n\n{body}\n")
    db = tmp_path / "kb.lancedb"
    env = {**os.environ, "MCP_ANALYSIS_INGEST__BATCH_DOCUMENTS": "4"}
    child = subprocess.Popen(
        [sys.executable, "-m", "mcp_analysis", "--db", str(db), "add", str(docs)],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    try:
        while _count(db, "document_meta") == 0:
            assert child.poll() is None, "ingest finished before it could be killed"
            assert time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(0.3)  # let it get somewhere into the next batch
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait()

    async def check() -> None:
        kb = await KnowledgeBase.open(make_settings(db))
        visible = await kb.corpus().documents()
        assert 0 < len(visible) < 120
        for meta in visible:  # every visible document is complete
            assert await kb.store.chunks(f"document_id = '{meta.id}'")
            assert await kb.store.items(f"document_id = '{meta.id}'")
            assert len(await kb.corpus().content(meta.id)) > 1000
        before = {m.uri for m in visible}
        report = await Ingestor(kb).add([docs])
        assert set(report.unchanged) == before
        assert len(report.added) == 120 - len(before)
        assert await kb.store.orphan_ids() == set()
        assert await kb.corpus().count() == 120
        await kb.close()

    anyio.run(check)
