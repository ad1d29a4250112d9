"""A knowledge base with a table gone or a data file emptied (a partial copy, a full disk, a folder
deleted by hand) is named damaged, with what to do, and nothing is written to it: never an empty
answer, a KeyError or Lance's raw I/O error, and never an `add` that reports its documents unchanged."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.errors import AnalysisError, DatabaseDamagedError
from mcp_analysis.store import schema
from mcp_analysis.store.database import Store, storage_errors
from tests.conftest import make_settings

pytestmark = pytest.mark.anyio

TABLES_READ = [name for name in schema.REQUIRED_TABLES if name != schema.SETTINGS]


def _listing(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in sorted(folder.rglob("*"))}


@pytest.mark.parametrize("gone", TABLES_READ)
async def test_a_missing_table_is_named_and_nothing_is_written(tmp_path: Path, gone: str) -> None:
    db = tmp_path / "kb.lancedb"
    store = await Store.open(db, create=True)
    await store.initialize("onnx:all-MiniLM-L6-v2", 384)
    store.close()
    shutil.rmtree(db / f"{gone}.lance")
    before = _listing(db)
    for create in (False, True):  # reading, and an `add` about to write
        with pytest.raises(DatabaseDamagedError) as info:
            await Store.open(db, create=create)
        said = str(info.value)
        assert f"The knowledge base at {db} is damaged: its table {gone}.lance is missing" in said
        assert "nothing was changed" in said and "mcp-analysis --db NEW_FOLDER add PATH" in said
    with pytest.raises(DatabaseDamagedError):
        await KnowledgeBase.open(make_settings(db))
    assert _listing(db) == before


async def test_two_missing_tables_are_both_named(tmp_path: Path) -> None:
    db = tmp_path / "kb.lancedb"
    store = await Store.open(db, create=True)
    await store.initialize("onnx:all-MiniLM-L6-v2", 384)
    store.close()
    for gone in (schema.CHUNKS, schema.DOCUMENTS):
        shutil.rmtree(db / f"{gone}.lance")
    with pytest.raises(DatabaseDamagedError, match=r"its tables documents\.lance, chunks\.lance are missing"):
        await Store.open(db)


def test_lances_io_error_on_a_local_disk_is_a_damaged_knowledge_base_without_the_rust_place(tmp_path: Path) -> None:
    raw = (
        "lance error: LanceError(IO): Generic LocalFileSystem error: failed to fill whole buffer, "
        "/rustc/2d8144b7880597b6e6d3dfd63a9a9efae3f533d3/library/core/src/ops/function.rs:250:5"
    )
    for failure in (RuntimeError(raw), ExceptionGroup("legs", [RuntimeError(raw), ValueError("other")])):
        with pytest.raises(DatabaseDamagedError) as info, storage_errors(str(tmp_path)):
            raise failure
        said = str(info.value)
        assert "reading it failed (lance error: LanceError(IO): Generic LocalFileSystem error: failed to fill" in said
        assert "/rustc/" not in said and "function.rs" not in said
    with pytest.raises(FileNotFoundError) as passed, storage_errors(str(tmp_path)):  # not Lance's: the caller's own
        raise FileNotFoundError("no such file")
    assert passed.value.__cause__ is None
    denied = RuntimeError("lance error: LanceError(IO): Generic LocalFileSystem error: Permission denied (os error 13)")
    with pytest.raises(AnalysisError) as info, storage_errors(str(tmp_path)):  # not damage: a right missing
        raise denied
    assert not isinstance(info.value, DatabaseDamagedError)
    assert "cannot be read (lance error: LanceError(IO): Generic LocalFileSystem error: Permission denied" in str(
        info.value
    ) and "may read that folder and every file in it" in str(info.value)


async def test_a_search_over_emptied_chunk_data_says_damaged(sample_db: Path, tmp_path: Path) -> None:
    db = tmp_path / "kb.lancedb"
    shutil.copytree(sample_db, db)
    for data in (db / "chunks.lance" / "data").iterdir():
        data.write_bytes(b"")
    kb = await KnowledgeBase.open(make_settings(db))
    try:
        with pytest.raises(DatabaseDamagedError, match=r"is damaged: reading it failed \(.*LanceError\(IO\)"):
            await kb.corpus().search("revenue by region", limit=3)
    finally:
        await kb.close()
