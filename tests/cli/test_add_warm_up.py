"""Whether `add` has its conversion worker load the parsers before the knowledge base opens.

Only when a file is sure to be converted (`cli/documents.py` `_converts`): a new knowledge base, or
a named file modified since the knowledge base's last commit. Otherwise a file that turns out
unchanged would wait for the parsers' imports (`bench/cli_add.py`).
"""

from __future__ import annotations

import os
from pathlib import Path

import lancedb

from mcp_analysis.cli.documents import _converts


def _file(path: Path, mtime: float) -> str:
    path.write_text("# A note\n\nThe tide turned.\n")
    os.utime(path, (mtime, mtime))
    return str(path)


def _knowledge_base(db: Path, written: float) -> Path:
    lancedb.connect(str(db)).create_table("chunks", data=[{"id": 1}])
    os.utime(db / "chunks.lance" / "_versions", (written, written))
    return db


def test_into_a_new_knowledge_base_anything_named_is_converted(tmp_path: Path) -> None:
    db = tmp_path / "new.lancedb"
    folder = tmp_path / "folder"
    folder.mkdir()
    assert _converts(db, [_file(tmp_path / "old.md", 1_000_000)])
    assert _converts(db, [str(folder)])
    assert not _converts(db, [str(tmp_path / "missing.md")])


def test_into_a_knowledge_base_in_use_only_a_file_changed_since_its_last_commit(tmp_path: Path) -> None:
    db = _knowledge_base(tmp_path / "kb.lancedb", written=2_000_000)
    older, newer = _file(tmp_path / "older.md", 1_000_000), _file(tmp_path / "newer.md", 3_000_000)
    assert not _converts(db, [older])  # added before, most likely: the read tells
    assert _converts(db, [older, newer])
    folder = tmp_path / "folder"
    folder.mkdir()
    os.utime(folder, (3_000_000, 3_000_000))
    assert not _converts(db, [str(folder)])  # what a folder holds is not looked at here


def test_objects_and_object_stores_are_never_guessed(tmp_path: Path) -> None:
    assert not _converts("s3://bucket/kb.lancedb", [_file(tmp_path / "new.md", 3_000_000)])
    assert not _converts(tmp_path / "new.lancedb", ["s3://bucket/notes/"])
