"""A local knowledge base's last write, told from its folders without opening it (store/written.py)."""

from __future__ import annotations

import os
from pathlib import Path

import lancedb
import pytest

from mcp_analysis.store.written import last_written


def test_a_knowledge_base_not_made_yet_was_never_written(tmp_path: Path) -> None:
    assert last_written(tmp_path / "kb.lancedb") == 0.0
    assert last_written(tmp_path) == 0.0  # a folder without tables


def test_an_object_store_location_cannot_be_told() -> None:
    assert last_written("s3://bucket/kb.lancedb") is None


def test_each_commit_moves_the_last_write_forward(tmp_path: Path) -> None:
    db = tmp_path / "kb.lancedb"
    table = lancedb.connect(str(db)).create_table("chunks", data=[{"id": 1, "text": "a berth"}])
    versions = db / "chunks.lance" / "_versions"
    os.utime(versions, (1_000_000, 1_000_000))  # an old commit, as a clock would have left it
    assert last_written(db) == pytest.approx(1_000_000)
    table.add([{"id": 2, "text": "a crane"}])
    written = last_written(db)
    assert written is not None and written > 1_000_000
    assert written == pytest.approx(versions.stat().st_mtime)


def test_the_newest_table_counts(tmp_path: Path) -> None:
    db = tmp_path / "kb.lancedb"
    connection = lancedb.connect(str(db))
    connection.create_table("chunks", data=[{"id": 1}])
    connection.create_table("documents", data=[{"id": 1}])
    os.utime(db / "chunks.lance" / "_versions", (1_000_000, 1_000_000))
    os.utime(db / "documents.lance" / "_versions", (2_000_000, 2_000_000))
    assert last_written(db) == pytest.approx(2_000_000)
