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
from mcp_analysis.errors import AnalysisError
from mcp_analysis.ingest.removal import find_document, remove_document
from mcp_analysis.store.models import DocumentMeta
from tests.conftest import REPO, make_settings
from tests.docs_factory import write_all, write_markdown
from tests.ingest.module_pool import ModulePool

pytestmark = pytest.mark.anyio

_POOL = ModulePool()
_shared_pool = _POOL.fixture()


async def _fresh_kb(tmp_path: Path, **overrides: object) -> KnowledgeBase:
    return await KnowledgeBase.open(make_settings(tmp_path / "kb.lancedb", **overrides), create=True)


async def test_every_format_yields_docling_items(tmp_path: Path) -> None:
    files = write_all(tmp_path / "docs")
    kb = await _fresh_kb(tmp_path)
    report = await _POOL.ingestor(kb).add([tmp_path / "docs"])
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
    first = await _POOL.ingestor(kb).add([doc], metadata={"team": "ops"})
    assert len(first.added) == 1
    old = (await kb.corpus().documents())[0]
    counts = await kb.store.counts()

    again = await _POOL.ingestor(kb).add([doc], metadata={"team": "ops"})
    assert again.unchanged == [doc.as_uri()] and not again.added and not again.replaced
    assert await kb.store.counts() == counts

    retitled = await _POOL.ingestor(kb).add([doc], title="Renamed Log")
    assert retitled.metadata_updated == [doc.as_uri()]
    meta = (await kb.corpus().documents())[0]
    assert meta.id == old.id and meta.title == "Renamed Log" and meta.metadata["team"] == "ops"

    doc.write_text("# Harbour Log\n\nCompletely new content about icebreakers.\n")
    changed = await _POOL.ingestor(kb).add([doc])
    assert changed.replaced == [doc.as_uri()]
    docs = await kb.corpus().documents()
    assert len(docs) == 1 and docs[0].id != old.id
    assert docs[0].created_at == old.created_at
    # The metadata given earlier with --meta stays with the changed file.
    assert docs[0].metadata == {"format": "markdown", "file_name": "log.md", "tables": 0, "team": "ops"}
    assert "icebreakers" in await kb.corpus().content(docs[0].id)
    assert await kb.store.chunks(f"document_id = '{old.id}'") == []
    assert await kb.store.orphan_ids() == set()

    # New --meta on a changed file wins for its keys; other keys given earlier stay.
    doc.write_text("# Harbour Log\n\nNow about tugboats.\n")
    await _POOL.ingestor(kb).add([doc], metadata={"team": "pilots", "shift": "night"})
    meta = (await kb.corpus().documents())[0]
    assert meta.metadata == {
        "format": "markdown",
        "file_name": "log.md",
        "tables": 0,
        "team": "pilots",
        "shift": "night",
    }

    removed = await remove_document(kb, str(doc))
    assert removed.id == meta.id
    assert await kb.corpus().count() == 0
    assert (await kb.store.counts())["chunks"] == 0
    await kb.close()


async def test_the_report_lists_the_documents_as_written_after_several_batches(tmp_path: Path) -> None:
    """`IngestReport.documents` (what a folder watcher finds deleted files in) is the stored list,
    whichever batch wrote a document and whatever happened to it: added, replaced, moved, unchanged."""
    docs = tmp_path / "docs"
    docs.mkdir()
    for n, topic in enumerate(("tugs", "berths", "cargo", "dredging", "pilots")):
        (docs / f"{n}-{topic}.md").write_text(f"# {topic.title()}\n\nThe {topic} note of the harbour office.\n")
    kb = await _fresh_kb(tmp_path, ingest={"batch_documents": 2})

    async def stored() -> dict[str, dict[str, object]]:
        return {m.uri: m.model_dump() for m in await kb.store.all_meta()}

    first = await _POOL.ingestor(kb).add([docs])
    assert len(first.added) == 5
    assert {m.uri: m.model_dump() for m in first.documents} == await stored()

    (docs / "0-tugs.md").write_text("# Tugs\n\nThree tugs stand by for the tanker on Tuesday.\n")  # replaced
    (docs / "1-berths.md").rename(docs / "1-berth-plan.md")  # moved
    (docs / "5-locks.md").write_text("# Locks\n\nThe lock keeper opens at dawn.\n")  # added
    second = await _POOL.ingestor(kb).add([docs])
    assert len(second.replaced) == len(second.moved) == len(second.added) == 1 and len(second.unchanged) == 3
    assert {m.uri: m.model_dump() for m in second.documents} == await stored()
    await kb.close()


class _DeleteBefore:
    """A progress sink that deletes `victim` as the add reaches `label`: a file gone mid-add."""

    def __init__(self, victim: Path, label: str) -> None:
        self.victim, self.label = victim, label

    def start(self, total: int) -> None: ...

    def advance(self, label: str) -> None:
        if label.startswith(self.label):
            self.victim.unlink(missing_ok=True)

    def phase(self, label: str) -> None: ...

    def finish(self) -> None: ...


async def test_a_file_changed_then_moved_away_mid_add_stays_in_the_report(tmp_path: Path) -> None:
    """a.md changed (written anew by this add), then its old bytes show up as b.md while a.md is
    deleted: b.md is the stored document moved, and the new a.md, stored, is still reported."""
    docs = tmp_path / "docs"
    docs.mkdir()
    old = "# Tugs\n\nThe tugs note of the harbour office.\n"
    (docs / "a.md").write_text(old)
    kb = await _fresh_kb(tmp_path)
    await _POOL.ingestor(kb).add([docs])
    (docs / "a.md").write_text("# Tugs\n\nThree tugs stand by for the tanker.\n")
    (docs / "b.md").write_text(old)
    report = await _POOL.ingestor(kb, progress=_DeleteBefore(docs / "a.md", "b")).add([docs])
    assert report.moved == [((docs / "a.md").as_uri(), (docs / "b.md").as_uri())], report
    stored = {m.uri: m.id for m in await kb.store.all_meta()}
    assert {m.uri: m.id for m in report.documents} == stored
    assert set(stored) == {(docs / "a.md").as_uri(), (docs / "b.md").as_uri()}
    await kb.close()


def _meta(doc_id: str, name: str) -> DocumentMeta:
    return DocumentMeta(
        id=doc_id, uri=f"file:///docs/{name}", title=name, created_at="2025-01-01", updated_at="2025-01-01"
    )


def test_documents_are_found_by_id_unique_prefix_uri_or_path(tmp_path: Path) -> None:
    added_from = tmp_path / "notes.md"
    metas = [
        _meta("6c0d8b66-1111-4000-8000-000000000001", "a.md"),
        _meta("6c0d8b66-2222-4000-8000-000000000002", "b.md"),
        _meta("57299dc7-3333-4000-8000-000000000003", "c.md"),
        DocumentMeta(
            id="9f00aa11-4444-4000-8000-000000000004",
            uri=added_from.as_uri(),
            title="notes",
            created_at="2025-01-01",
            updated_at="2025-01-01",
        ),
    ]
    assert find_document(metas, "57299dc7-3333-4000-8000-000000000003") is metas[2]
    assert find_document(metas, "5729") is metas[2]
    assert find_document(metas, " 6C0D8B66-2 ") is metas[1]  # case and stray blanks do not matter
    assert find_document(metas, "file:///docs/a.md") is metas[0]
    assert find_document(metas, str(added_from)) is metas[3]
    with pytest.raises(AnalysisError, match=r"'6c0d8b66' matches 2 documents \(6c0d8b66-1111.*6c0d8b66-2222"):
        find_document(metas, "6c0d8b66")
    with pytest.raises(AnalysisError, match="at least 4 characters"):
        find_document(metas, "572")  # too short to be taken as a prefix
    with pytest.raises(AnalysisError, match="No document"):
        find_document(metas, "ffff")


async def test_bad_files_are_reported_and_the_rest_goes_in(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    write_markdown(docs / "good.md")
    (docs / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 50)
    (docs / "clip.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42" + b"\x00" * 50)
    (docs / "broken.pdf").write_bytes(b"%PDF-1.4 this is not really a pdf")
    (docs / "binary.txt").write_bytes(b"abc\x00\x01\x02")
    (docs / "empty.md").write_text("   \n")
    (docs / ".hidden.md").write_text("# secret\n")
    (docs / "blob").write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)))  # no extension, binary
    (tmp_path / "nothing-here" / ".git").mkdir(parents=True)
    (tmp_path / "nothing-here" / ".git" / "config").write_text("[core]\n")
    kb = await _fresh_kb(tmp_path)
    report = await _POOL.ingestor(kb).add([docs, tmp_path / "does-not-exist.md", tmp_path / "nothing-here"])
    assert [Path(u).name for u in report.added] == ["good.md"]
    skipped = {Path(p).name: reason for p, reason in report.skipped}
    assert set(skipped) == {
        "image.png",
        "clip.mp4",
        "broken.pdf",
        "binary.txt",
        "empty.md",
        "does-not-exist.md",
        "blob",
        "nothing-here",
    }
    assert skipped["image.png"].startswith("not a readable image")
    assert skipped["clip.mp4"].startswith("unsupported file type '.mp4' (supported: .md")
    assert "PDF" in skipped["broken.pdf"]
    assert "binary" in skipped["binary.txt"]
    assert "no text" in skipped["empty.md"]
    assert "does not exist" in skipped["does-not-exist.md"]
    assert skipped["blob"] == "no file extension, and the content is not text"
    assert skipped["nothing-here"].startswith("no files in this directory")
    await kb.close()


async def test_files_without_an_extension_are_text_when_their_content_is(tmp_path: Path) -> None:
    docs = tmp_path / "debian"
    docs.mkdir()
    (docs / "copyright").write_text(
        "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\n"
        "Files: *\nCopyright: 2025 Halvorsen Marine Systems\nLicense: MIT\n"
    )
    (docs / "README").write_bytes(
        "Tidewater gauge\n\nCalibrate the gauge at slack water, caf\xe9 hours.\n".encode("cp1252")
    )
    (docs / "LICENSE").write_text("MIT License\n\nPermission is hereby granted, free of charge, ...\n")
    kb = await _fresh_kb(tmp_path)
    report = await _POOL.ingestor(kb).add([docs])
    assert report.skipped == []
    by_name = {d.metadata["file_name"]: d for d in await kb.corpus().documents()}
    assert set(by_name) == {"copyright", "README", "LICENSE"}
    assert {d.metadata["format"] for d in by_name.values()} == {"text"}
    assert by_name["README"].title == "Tidewater gauge"
    assert "café hours" in await kb.corpus().content(by_name["README"].id)
    assert "Halvorsen Marine Systems" in await kb.corpus().content(by_name["copyright"].id)
    await kb.close()


async def test_a_file_that_is_a_private_key_is_refused_whatever_its_name(tmp_path: Path) -> None:
    """tests/ingest/test_secrets.py has the rules; here the worker reads the files."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "rotation.md").write_text(
        "# Key rotation\n\nA key file begins with -----BEGIN OPENSSH PRIVATE KEY----- and is never shared.\n"
    )
    (docs / "deploy_key").write_text("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----")
    (docs / "backup.txt").write_bytes(b"\xef\xbb\xbf\n-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE\n")
    (docs / "id_ed25519").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nb3Bl\n")
    kb = await _fresh_kb(tmp_path)
    report = await _POOL.ingestor(kb).add([docs])
    assert [d.metadata["file_name"] for d in await kb.corpus().documents()] == ["rotation.md"]
    refused = dict(report.skipped)
    assert set(refused) == {str(docs / "deploy_key"), str(docs / "backup.txt")}  # id_ed25519: left out by name
    assert refused[str(docs / "deploy_key")].endswith(
        "it is a private key (it begins with -----BEGIN RSA PRIVATE KEY-----): secrets are never added as documents"
    )
    assert "-----BEGIN EC PRIVATE KEY-----" in refused[str(docs / "backup.txt")]
    await kb.close()


def _count(db: Path, table: str) -> int:
    async def go() -> int:
        conn = await lancedb.connect_async(str(db), read_consistency_interval=None)
        names = (await conn.list_tables()).tables
        if table not in names:
            return 0
        try:
            return await (await conn.open_table(table)).count_rows()
        except ValueError as exc:  # listed while the ingest is creating it (a folder, no version yet)
            if "was not found" not in str(exc):
                raise
            return 0

    return anyio.run(go)


#: Ten batches of four: the kill, soon after the first commit, falls mid-ingest (and the rerun embeds little).
KILLED_DOCUMENTS = 40


def test_killed_ingest_leaves_no_half_document_and_rerun_completes(tmp_path: Path) -> None:
    docs = tmp_path / "many"
    docs.mkdir()
    paragraph = "Section {n} describes berth {n} with depth, length, fenders and bollards in detail. " * 12
    for n in range(KILLED_DOCUMENTS):
        body = "\n\n".join(f"## Part {k}\n\n" + paragraph.format(n=f"{n}-{k}") for k in range(2))
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
        assert 0 < len(visible) < KILLED_DOCUMENTS
        for meta in visible:  # every visible document is complete
            assert await kb.store.chunks(f"document_id = '{meta.id}'")
            assert await kb.store.items(f"document_id = '{meta.id}'")
            assert len(await kb.corpus().content(meta.id)) > 1000
        before = {m.uri for m in visible}
        report = await _POOL.ingestor(kb).add([docs])
        assert set(report.unchanged) == before
        assert len(report.added) == KILLED_DOCUMENTS - len(before)
        assert await kb.store.orphan_ids() == set()
        assert await kb.corpus().count() == KILLED_DOCUMENTS
        await kb.close()

    anyio.run(check)


async def test_a_folder_holding_the_knowledge_base_is_added_without_the_knowledge_base(tmp_path: Path) -> None:
    folder = tmp_path / "work"
    folder.mkdir()
    write_markdown(folder / "log.md")
    kb = await KnowledgeBase.open(make_settings(folder / "kb.lancedb"), create=True)
    try:
        await _POOL.ingestor(kb).add([folder / "log.md"])  # the store now holds .json, .lance, .txn files
        again = await _POOL.ingestor(kb).add([folder, folder / "kb.lancedb"])
        assert again.added == [] and again.unchanged == [(folder / "log.md").as_uri()]
        assert [reason for _, reason in again.skipped] == [
            "is the knowledge base's own folder, never added as documents"
        ]
        assert [Path(m.uri).name for m in await kb.store.all_meta()] == ["log.md"]
    finally:
        await kb.close()


async def test_a_changed_file_keeps_given_metadata_but_not_what_its_old_version_recorded(tmp_path: Path) -> None:
    """Metadata given with an add stays when the file changes; what ingest recorded from the old
    version (its HTML page title) does not outlive it, or ranking would read a title the page lost."""
    page = tmp_path / "page.html"
    page.write_text(
        "<html><head><title>Structures (libffi manual)</title></head><body><h1>2.3.2 Structures</h1>"
        "<p>Structures are described by type descriptors.</p></body></html>"
    )
    kb = await _fresh_kb(tmp_path)
    try:
        await _POOL.ingestor(kb).add([page], metadata={"team": "docs"})
        (first,) = await kb.store.all_meta()
        assert first.metadata["page_title"] == "Structures (libffi manual)"

        page.write_text("<html><body><h1>Unions and enums</h1><p>Unions share their storage.</p></body></html>")
        report = await _POOL.ingestor(kb).add([page])
        assert len(report.replaced) == 1
        (second,) = await kb.store.all_meta()
        assert second.title == "Unions and enums" and "page_title" not in second.metadata
        assert second.metadata["team"] == "docs" and second.metadata["format"] == "html"
    finally:
        await kb.close()
