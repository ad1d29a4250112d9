"""A file moved or renamed since it was added is the same document at its new place."""

from __future__ import annotations

import shutil
from pathlib import Path, PureWindowsPath

import pytest

from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.ingest import moves, pipeline
from mcp_analysis.ingest.files import file_uri
from mcp_analysis.ingest.moves import local_path
from mcp_analysis.session.citations import resolve_citations
from mcp_analysis.session.state import AnalysisState
from mcp_analysis.store.filters import sql_in
from mcp_analysis.store.models import DocumentMeta
from mcp_analysis.watch.mirror import FolderMirror
from mcp_analysis.watch.rules import FileRules
from tests.conftest import make_settings
from tests.ingest.module_pool import ModulePool

pytestmark = pytest.mark.anyio

UNTITLED = "the harbour master approved the night pilotage of the grain carrier at berth nine\n"
TITLED = "# Tug Roster\n\nThree tugs stand by for the tanker on Tuesday.\n"


_POOL = ModulePool()
_shared_pool = _POOL.fixture()


async def _kb(tmp_path: Path) -> KnowledgeBase:
    return await KnowledgeBase.open(make_settings(tmp_path / "kb.lancedb"), create=True)


async def _folder_added(tmp_path: Path, files: dict[str, str]) -> tuple[Path, KnowledgeBase]:
    """A new knowledge base with `files` (name: text) added from the folder tmp_path/docs."""
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in files.items():
        (docs / name).write_text(text)
    kb = await _kb(tmp_path)
    await _POOL.ingestor(kb).add([docs])
    return docs, kb


async def _chunk_ids(kb: KnowledgeBase, document_id: str) -> list[str]:
    rows = await kb.store.chunks(sql_in("document_id", [document_id]), columns=["id"])
    return sorted(r["id"] for r in rows)


async def test_a_renamed_file_keeps_its_document_id_chunks_and_vectors(tmp_path: Path) -> None:
    docs, kb = await _folder_added(tmp_path, {"pilotage.txt": UNTITLED, "tugs.md": TITLED})
    before = {d.uri: d for d in await kb.corpus().documents()}
    old = before[file_uri(docs / "pilotage.txt")]
    old_titled = before[file_uri(docs / "tugs.md")]
    chunks = await _chunk_ids(kb, old.id)
    assert old.title == "pilotage" and chunks  # no title inside: the file's name

    (docs / "pilotage.txt").rename(docs / "night-pilotage.txt")
    (docs / "tugs.md").rename(docs / "roster.md")
    version = await kb.store.meta_version()
    report = await _POOL.ingestor(kb).add([docs / "night-pilotage.txt", docs / "roster.md"])
    assert await kb.store.meta_version() == version + 1  # both moves in one commit

    assert sorted(report.moved) == sorted(
        [(old.uri, file_uri(docs / "night-pilotage.txt")), (old_titled.uri, file_uri(docs / "roster.md"))]
    )
    assert report.added == [] and report.replaced == [] and report.chunks == 0  # nothing converted or embedded
    assert "2 moved" in report.summary()
    after = {d.id: d for d in await kb.corpus().documents()}
    assert set(after) == {old.id, old_titled.id}
    moved = after[old.id]
    assert moved.uri == file_uri(docs / "night-pilotage.txt")
    assert moved.title == "night-pilotage"  # the name was its title: it follows the name
    assert moved.metadata["file_name"] == "night-pilotage.txt"
    assert moved.content_hash == old.content_hash and moved.created_at == old.created_at
    assert after[old_titled.id].title == "Tug Roster"  # a title from inside the file stays
    assert await _chunk_ids(kb, old.id) == chunks
    hits = await kb.corpus().search("night pilotage of the grain carrier", limit=1)
    assert hits[0].document_id == old.id and hits[0].document_uri == moved.uri


async def test_a_copy_whose_original_is_still_there_is_a_new_document(tmp_path: Path) -> None:
    docs, kb = await _folder_added(tmp_path, {"pilotage.txt": UNTITLED})
    shutil.copy(docs / "pilotage.txt", docs / "copy.txt")
    report = await _POOL.ingestor(kb).add([docs / "copy.txt"])
    assert report.moved == [] and report.added == [file_uri(docs / "copy.txt")]
    assert len(await kb.corpus().documents()) == 2


async def test_one_moved_document_is_claimed_by_one_new_file_only(tmp_path: Path) -> None:
    docs, kb = await _folder_added(tmp_path, {"pilotage.txt": UNTITLED})
    (docs / "pilotage.txt").rename(docs / "a.txt")
    shutil.copy(docs / "a.txt", docs / "b.txt")
    report = await _POOL.ingestor(kb).add([docs / "a.txt", docs / "b.txt"])
    assert report.moved == [(file_uri(docs / "pilotage.txt"), file_uri(docs / "a.txt"))]
    assert report.added == [file_uri(docs / "b.txt")]
    assert {d.uri for d in await kb.corpus().documents()} == {file_uri(docs / "a.txt"), file_uri(docs / "b.txt")}


async def test_a_renamed_folder_in_a_watched_folder_is_moved_not_removed_and_added(tmp_path: Path) -> None:
    watched = tmp_path / "watched"
    (watched / "2025").mkdir(parents=True)
    (watched / "2025" / "pilotage.txt").write_text(UNTITLED)
    (watched / "2025" / "tugs.md").write_text(TITLED)
    kb = await _kb(tmp_path)
    mirror = FolderMirror(kb, [watched], FileRules())
    try:
        await mirror.sync()
        ids = {d.id for d in await kb.corpus().documents()}
        (watched / "2025").rename(watched / "archive-2025")
        report = await mirror.apply([watched / "2025", watched / "archive-2025"])  # the watcher's two events
    finally:
        mirror.close()

    assert len(report.moved) == 2 and report.added == [] and report.removed == [] and report.chunks == 0
    assert "2 moved" in report.summary() and report.changed
    documents = await kb.corpus().documents()
    assert {d.id for d in documents} == ids
    assert {Path(local_path(d.uri) or "").parent.name for d in documents} == {"archive-2025"}


def test_local_path_reads_back_every_byte_of_a_file_uri(tmp_path: Path) -> None:
    odd = tmp_path / "caf\udce9 100%.txt"  # a name that is not UTF-8 (the byte 0xE9), and a percent sign
    assert local_path(odd.as_uri()) == str(odd)
    assert local_path("https://example.com/a.txt") is None
    assert local_path("s3://bucket/a.txt") is None


async def test_a_rename_to_another_suffix_is_read_again(tmp_path: Path) -> None:
    """ports.txt renamed ports.csv is read as a table now: not the old conversion under a new name."""
    docs, kb = await _folder_added(tmp_path, {"ports.txt": "port,calls\nBergen,12\nOslo,30\n"})
    (docs / "ports.txt").rename(docs / "ports.csv")
    report = await _POOL.ingestor(kb).add([docs / "ports.csv"])
    assert report.moved == [] and report.added == [file_uri(docs / "ports.csv")]
    formats = {Path(d.uri).name: d.metadata["format"] for d in await kb.corpus().documents()}
    assert formats == {"ports.txt": "text", "ports.csv": "csv"}


async def test_an_old_path_met_again_after_its_document_moved_is_a_new_document(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The old path gone only for a moment (an editor saving by rename) when its copy claimed the
    document, then read later in the same add with other bytes: a new document, the moved one whole."""
    docs, kb = await _folder_added(tmp_path, {"a.txt": UNTITLED})
    [original] = await kb.corpus().documents()
    chunks = await _chunk_ids(kb, original.id)
    shutil.copy(docs / "a.txt", docs / "b.txt")
    (docs / "a.txt").write_text("the tanker left at dawn with a new cargo of timber\n")
    monkeypatch.setattr(moves, "gone", lambda path: True)  # a.txt was away when b.txt was read
    report = await _POOL.ingestor(kb).add([docs / "b.txt", docs / "a.txt"])
    assert report.moved == [(file_uri(docs / "a.txt"), file_uri(docs / "b.txt"))]
    assert report.added == [file_uri(docs / "a.txt")] and report.replaced == []
    by_uri = {d.uri: d for d in await kb.corpus().documents()}
    assert by_uri[file_uri(docs / "b.txt")].id == original.id
    assert await _chunk_ids(kb, original.id) == chunks  # not emptied by a replace of its old path
    assert by_uri[file_uri(docs / "a.txt")].id != original.id
    hits = await kb.corpus().search("tanker left at dawn with timber", limit=1)
    assert hits[0].document_uri == file_uri(docs / "a.txt")


async def test_a_watched_folder_does_not_take_over_a_document_added_from_elsewhere(tmp_path: Path) -> None:
    outside, watched = tmp_path / "outside", tmp_path / "watched"
    outside.mkdir()
    watched.mkdir()
    (outside / "policy.md").write_text(TITLED)
    kb = await _kb(tmp_path)
    await _POOL.ingestor(kb).add([outside / "policy.md"], metadata={"source": "manual"})
    [manual] = await kb.corpus().documents()
    (outside / "policy.md").unlink()  # its document stays, as documents added by hand do
    (watched / "policy.md").write_text(TITLED)  # the same bytes, inside the watched folder
    mirror = FolderMirror(kb, [watched], FileRules())
    try:
        report = await mirror.sync()
        assert report.moved == [] and report.added == [file_uri(watched / "policy.md")]
        (watched / "policy.md").unlink()
        await mirror.apply([watched / "policy.md"])
    finally:
        mirror.close()
    [left] = await kb.corpus().documents()
    assert left.id == manual.id and left.uri == manual.uri and left.metadata["source"] == "manual"


def test_gone_means_known_not_to_exist(tmp_path: Path) -> None:
    assert moves.gone(str(tmp_path / "missing.txt"))
    assert moves.gone(str(tmp_path / "file.txt" / "below"))  # a file where a folder should be
    (tmp_path / "file.txt").write_text("x")
    assert not moves.gone(str(tmp_path / "file.txt"))
    assert not moves.gone(str(tmp_path / ("n" * 5000)))  # cannot be looked at (name too long): not gone
    assert not moves.gone(str(tmp_path / "nul\0byte"))


def test_local_path_of_a_windows_file_uri(monkeypatch: pytest.MonkeyPatch) -> None:
    import nturl2path

    monkeypatch.setattr(moves.os, "name", "nt")
    monkeypatch.setattr(moves, "url2pathname", nturl2path.url2pathname)
    uri = PureWindowsPath("C:/Reports 2025/caf\u00e9 #1.pdf").as_uri()  # what file_uri makes on Windows
    assert local_path(uri) == "C:\\Reports 2025\\caf\u00e9 #1.pdf"
    assert local_path("file://server/share/a.pdf") is None  # a UNC share: not a local file


async def test_add_does_not_hand_a_document_from_another_folder_to_a_file_with_its_bytes(tmp_path: Path) -> None:
    """A file:// uri names no machine: on a knowledge base shared by several, a file missing here may
    be another machine's. `add` only looks for moved files' documents in the folders it adds."""
    alice, bob = tmp_path / "alice", tmp_path / "bob"
    alice.mkdir()
    bob.mkdir()
    (alice / "handbook.md").write_text(TITLED)
    kb = await _kb(tmp_path)
    await _POOL.ingestor(kb).add([alice / "handbook.md"], metadata={"owner": "alice"})
    (alice / "handbook.md").unlink()  # as seen from another machine: not here
    (bob / "handbook-2026.md").write_text(TITLED)
    report = await _POOL.ingestor(kb).add([bob / "handbook-2026.md"], metadata={"owner": "bob"})
    assert report.moved == [] and report.added == [file_uri(bob / "handbook-2026.md")]
    owners = {Path(d.uri).parent.name: d.metadata["owner"] for d in await kb.corpus().documents()}
    assert owners == {"alice": "alice", "bob": "bob"}


async def test_files_with_the_same_bytes_keep_their_own_documents_when_their_folder_is_renamed(
    tmp_path: Path,
) -> None:
    watched = tmp_path / "watched"
    (watched / "f").mkdir(parents=True)
    for name in ("acme.txt", "beta.txt"):  # the same bytes, told apart only by name (and metadata)
        (watched / "f" / name).write_text(UNTITLED)
    kb = await _kb(tmp_path)
    await _POOL.ingestor(kb).add([watched / "f" / "beta.txt"], metadata={"client": "Beta"})
    await _POOL.ingestor(kb).add([watched / "f" / "acme.txt"], metadata={"client": "Acme"})
    mirror = FolderMirror(kb, [watched], FileRules())
    try:
        (watched / "f").rename(watched / "g")
        report = await mirror.apply([watched / "f", watched / "g"])
    finally:
        mirror.close()
    assert len(report.moved) == 2 and report.added == []
    clients = {Path(d.uri).name: d.metadata["client"] for d in await kb.corpus().documents()}
    assert clients == {"acme.txt": "Acme", "beta.txt": "Beta"}


async def test_a_document_named_after_its_file_is_read_again_when_renamed(tmp_path: Path) -> None:
    """A CSV's table takes the file's name: a move would keep the old one."""
    docs, kb = await _folder_added(tmp_path, {"sales_2024.csv": "region,total\nnorth,12\nsouth,30\n"})
    (docs / "sales_2024.csv").rename(docs / "sales_2025.csv")
    report = await _POOL.ingestor(kb).add([docs / "sales_2025.csv"])
    assert report.moved == [] and report.added == [file_uri(docs / "sales_2025.csv")]
    [new] = [d for d in await kb.corpus().documents() if d.uri.endswith("sales_2025.csv")]
    assert [t["name"] for t in await kb.corpus().tables(new.id)] == ["sales_2025"]


async def test_a_passage_found_before_its_file_moved_is_cited_at_its_new_place(tmp_path: Path) -> None:
    docs, kb = await _folder_added(tmp_path, {"pilotage.txt": UNTITLED})
    state = AnalysisState()
    hits = await kb.corpus().search("night pilotage of the grain carrier", limit=1)
    state.searches["night pilotage"] = hits  # what a session keeps of a search it ran
    (docs / "pilotage.txt").rename(docs / "night-pilotage.txt")
    await _POOL.ingestor(kb).add([docs / "night-pilotage.txt"])
    outcome = await resolve_citations(state, kb.corpus(), [hits[0].chunk_id])
    [citation] = outcome.citations
    assert citation.document_uri == file_uri(docs / "night-pilotage.txt")
    assert citation.document_title == "night-pilotage"
    assert citation.content == hits[0].content  # the passage as the search showed it


def _meta(uri: str, digest: str = "d1") -> DocumentMeta:
    when = "2026-01-01T00:00:00+00:00"
    name = uri.rsplit("/", 1)[-1]
    return DocumentMeta(id=name, uri=uri, title="t", content_hash=digest, created_at=when, updated_at=when)


@pytest.mark.parametrize("order", [("acme", "beta"), ("beta", "acme")])
def test_of_documents_with_the_same_bytes_the_one_of_the_same_name_is_claimed_first(
    tmp_path: Path, order: tuple[str, str]
) -> None:
    gone_folder = tmp_path / "f"  # never made: both old files are gone
    stored = [_meta((gone_folder / f"{name}.pdf").as_uri()) for name in order]
    moves_ = moves.MovedFiles(stored, [tmp_path])
    new = tmp_path / "g"
    claimed = moves_.claim("d1", new / "beta.pdf")
    assert claimed is not None and claimed.uri.endswith("/f/beta.pdf")
    claimed = moves_.claim("d1", new / "acme.pdf")
    assert claimed is not None and claimed.uri.endswith("/f/acme.pdf")
    assert moves_.claim("d1", new / "other.pdf") is None  # each claimed once


def test_what_is_named_after_its_file_never_moves(tmp_path: Path) -> None:
    """Decided by the file's name, not by stored metadata (`--meta format=...` may overwrite that)."""
    for name, moves_ok in [("a.pdf", True), ("a.csv", False), ("a.xlsx", False), ("a.py", False), ("a.md", True)]:
        stored = [_meta((tmp_path / "gone" / name).as_uri())]
        claimed = moves.MovedFiles(stored, [tmp_path]).claim("d1", tmp_path / "new" / name)
        assert (claimed is not None) == moves_ok, name


def test_add_looks_only_in_folders_that_are_there(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("x")
    folders = pipeline._folders_of([tmp_path / "docs", tmp_path / "docs" / "a.md", tmp_path / "typo"])
    assert folders == [tmp_path / "docs"]


def test_a_hard_link_is_not_a_move(tmp_path: Path) -> None:
    (tmp_path / "a.pdf").write_bytes(b"%PDF")
    (tmp_path / "b.pdf").hardlink_to(tmp_path / "a.pdf")
    assert not moves.same_file(str(tmp_path / "a.pdf"), tmp_path / "b.pdf")
    assert moves.same_file(str(tmp_path / "a.pdf"), tmp_path / "a.pdf")
