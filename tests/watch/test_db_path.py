"""`--db` naming a file (or a path under one): every command that may create a knowledge base says so
the same way, before any lock or folder is made, and the file is left as it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli


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
