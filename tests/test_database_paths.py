"""A `--db` that can never be a knowledge base, or one that cannot be written, is named for what it
is, with what to do: never "No knowledge base ... create one with add" that `add` then refuses,
never an "unexpected OSError"."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from mcp_analysis.config import load_settings
from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.errors import DatabaseNotFoundError, ReadOnlyDatabaseError
from mcp_analysis.ingest.lock import LOCK_FILE, ingest_lock
from mcp_analysis.paths import foreign_folder, make_database_directory, not_a_folder
from mcp_analysis.server.runner import check_database


def test_a_file_and_a_link_to_nothing_are_named_for_what_they_are(tmp_path: Path) -> None:
    file, link, folder, new = tmp_path / "kb.txt", tmp_path / "link", tmp_path / "kb", tmp_path / "a" / "b"
    file.write_text("not a knowledge base")
    link.symlink_to(tmp_path / "missing")
    folder.mkdir()
    assert "is a file, not a LanceDB knowledge base directory" in (not_a_folder(file) or "")
    assert f"symbolic link to {tmp_path / 'missing'}, which does not exist" in (not_a_folder(link) or "")
    assert not_a_folder(folder) is None and not_a_folder(new) is None
    for unusable, said in ((file, "is a file"), (link, "symbolic link")):
        with pytest.raises(DatabaseNotFoundError, match=said):
            make_database_directory(unusable)
        with pytest.raises(DatabaseNotFoundError, match=said) as served:
            check_database(load_settings(db=unusable))
        assert "add PATH" not in str(served.value)  # not told to run a command that would refuse it
    with pytest.raises(DatabaseNotFoundError, match="symbolic link") as opened:
        anyio.run(KnowledgeBase.open, load_settings(db=link))  # list, search, info: the same words as serve
    assert "add PATH" not in str(opened.value)
    make_database_directory(new)
    assert new.is_dir() and not (tmp_path / "missing").exists()
    with pytest.raises(DatabaseNotFoundError, match="No knowledge base at"):
        check_database(load_settings(db=folder))  # an empty folder: `add` makes it one


def test_a_folder_of_other_files_is_named_with_what_it_holds_and_what_to_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in ("f.md", "a.md", "c.md", "e.md", "b.md", "d.md", ".hidden"):
        (docs / name).write_text("x")
    said = foreign_folder(docs) or ""
    assert f"{docs} holds other files (a.md, b.md, c.md, d.md, e.md and 1 more) and no knowledge base" in said
    assert f"`mcp-analysis --db {docs}.lancedb add {docs}`" in said
    with pytest.raises(DatabaseNotFoundError, match="holds other files"):
        make_database_directory(docs)
    with pytest.raises(DatabaseNotFoundError, match="holds other files"):
        check_database(load_settings(db=docs))  # `serve` says the same, not "create one with add"
    assert sorted(p.name for p in docs.iterdir())[0] == ".hidden" and not list(docs.glob("*.lance"))
    spaced = tmp_path / "my docs"
    spaced.mkdir()
    (spaced / "a.md").write_text("x")
    assert f"`mcp-analysis --db '{spaced}.lancedb' add '{spaced}'`" in (foreign_folder(spaced) or "")  # pastes as is
    monkeypatch.chdir(docs)  # `--db .` is named by the folder's own name, not "..lancedb"
    assert f"--db {docs}.lancedb add {docs}`" in (foreign_folder(Path()) or "")
    # Hidden files only, a table among the files, an empty or a missing folder: a knowledge base's folder.
    hidden, tables, empty = tmp_path / "hidden", tmp_path / "tables", tmp_path / "empty"
    for folder in (hidden, tables / "chunks.lance", empty):
        folder.mkdir(parents=True)
    (hidden / ".DS_Store").write_text("x")
    (tables / "notes.txt").write_text("x")
    for folder in (hidden, tables, empty, tmp_path / "missing", docs / "a.md"):
        assert foreign_folder(folder) is None, folder


def test_a_knowledge_base_that_cannot_be_written_says_so_before_anything_runs(tmp_path: Path) -> None:
    (tmp_path / LOCK_FILE).mkdir()  # the lock file cannot be opened (as on a read-only mount)
    ran: list[bool] = []

    async def write() -> None:
        async with ingest_lock(str(tmp_path)):
            ran.append(True)

    with pytest.raises(ReadOnlyDatabaseError, match=f"Cannot write to the knowledge base at {tmp_path}") as caught:
        anyio.run(write)
    assert "need write access" in str(caught.value) and "--db" in str(caught.value)
    assert ran == []
