"""`--db` naming a file (or a path under one): every command that may create a knowledge base says so
the same way, before any lock or folder is made, and the file is left as it was."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from tests.conftest import run_cli, run_cli_at_once


@pytest.mark.parametrize("command", [["sync"], ["serve", "--watch"], ["add"]])
def test_a_db_that_is_a_file_is_refused_by_name(tmp_path: Path, command: list[str]) -> None:
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nThe okapi.\n")
    not_a_db = tmp_path / "notes.txt"
    not_a_db.write_text("my own notes\n")
    result = run_cli("--db", str(not_a_db), *command, str(folder), timeout=120)
    assert result.returncode == 1, result.stderr
    said = " ".join(result.stderr.split())
    assert f"error: {not_a_db} is a file, not a LanceDB knowledge base directory." in said
    assert "FileExistsError" not in said and "Traceback" not in said
    assert not_a_db.read_text() == "my own notes\n"


@pytest.mark.parametrize("command", [["sync"], ["serve", "--watch"]])
def test_a_db_under_a_file_cannot_be_made_and_says_why(tmp_path: Path, command: list[str]) -> None:
    folder = tmp_path / "folder"
    folder.mkdir()
    (tmp_path / "file").write_text("x")
    db = tmp_path / "file" / "kb.lancedb"
    result = run_cli("--db", str(db), *command, str(folder), timeout=120)
    assert result.returncode == 1, result.stderr
    said = " ".join(result.stderr.split())
    assert f"error: Cannot create the knowledge base directory {db}: Not a directory." in said
    assert "NotADirectoryError" not in said


def test_a_db_that_is_a_folder_of_other_files_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    """`--db` at the documents themselves (the folder one meant to add) would mix the tables with the
    user's files; every command refuses it before making anything, and says what to run instead."""
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "a.md").write_text("# A\n\nThe okapi.\n")
    (docs / "sub" / "b.md").write_text("# B\n\nThe tapir.\n")
    before = sorted(p.relative_to(docs) for p in docs.rglob("*"))
    runs = {
        name: (["--db", str(docs), *command], {})
        for name, command in {
            "add": ["add", str(docs / "a.md")],
            "sync": ["sync", str(docs)],
            "watch": ["serve", "--watch", str(docs)],
            "list": ["list"],
        }.items()
    }
    for name, result in run_cli_at_once(runs, timeout=120).items():
        assert result.returncode == 1, (name, result.stderr)
        said = " ".join(result.stderr.split())
        assert f"{docs} holds other files (a.md, sub/) and no knowledge base" in said, (name, said)
        assert f"mcp-analysis --db {docs}.lancedb add {docs}" in said, (name, said)
        assert "Traceback" not in said
    assert sorted(p.relative_to(docs) for p in docs.rglob("*")) == before  # no table, no lock file
    suggested = re.search(r"run `mcp-analysis ([^`]+)`", said)
    assert suggested is not None, said
    added = run_cli(*shlex.split(suggested.group(1)), timeout=180)  # the command offered works as given
    assert added.returncode == 0, added.stderr
    assert (tmp_path / "docs.lancedb" / "documents.lance").is_dir()
    assert sorted(p.relative_to(docs) for p in docs.rglob("*")) == before


def test_a_folder_with_only_hidden_files_or_tables_is_a_knowledge_base_folder(tmp_path: Path) -> None:
    """A new folder holding only hidden files (.DS_Store, a lock left by a first add that failed) is
    still one a knowledge base can be made in."""
    db = tmp_path / "kb"
    db.mkdir()
    (db / ".DS_Store").write_bytes(b"\0")
    (tmp_path / "a.md").write_text("# A\n\nThe okapi.\n")
    result = run_cli("--db", str(db), "add", str(tmp_path / "a.md"), timeout=180)
    assert result.returncode == 0, result.stderr
    assert (db / "documents.lance").is_dir()
