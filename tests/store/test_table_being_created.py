"""A table another process is creating (its first ingest) is listed before it can be opened: LanceDB
makes the table's folder before its first version. Opening the knowledge base in that moment waits
for the table, where it said the database could not be read; a folder that never becomes a table is
still reported, once the wait is over."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import anyio
import pytest

from mcp_analysis.errors import DatabaseMismatchError
from mcp_analysis.store import database, schema
from mcp_analysis.store.database import Store

pytestmark = pytest.mark.anyio


async def _knowledge_base(tmp_path: Path) -> Path:
    db = tmp_path / "kb.lancedb"
    store = await Store.open(db, create=True)
    await store.initialize("onnx:all-MiniLM-L6-v2", 384)
    store.close()
    return db


@pytest.mark.parametrize("creating", [schema.DOCUMENT_META, schema.SETTINGS, schema.CHUNKS])
async def test_a_table_still_being_created_is_waited_for(tmp_path: Path, creating: str) -> None:
    db = await _knowledge_base(tmp_path)
    table = db / f"{creating}.lance"
    aside = tmp_path / "aside"
    table.rename(aside)
    table.mkdir()  # what a creating process has made so far: the folder, no version

    async def finish_creating() -> None:
        await anyio.sleep(0.5)
        table.rmdir()
        aside.rename(table)

    async with anyio.create_task_group() as tg:
        tg.start_soon(finish_creating)
        started = time.monotonic()
        store = await Store.open(db)
        waited = time.monotonic() - started
    assert waited >= 0.4  # it opened once the table was there, not before
    assert set(store.tables) == set(schema.TABLES)
    assert store.settings is not None and store.settings.vector_dim == 384
    assert await store.tables[creating].count_rows() == (1 if creating == schema.SETTINGS else 0)  # read, as written
    store.close()


async def test_a_folder_that_never_becomes_a_table_is_reported_after_the_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(database, "CREATING_GRACE", 0.3)
    db = await _knowledge_base(tmp_path)
    stray = db / f"{schema.CHUNKS}.lance"
    shutil.rmtree(stray)
    stray.mkdir()
    started = time.monotonic()
    with pytest.raises(DatabaseMismatchError, match=r"cannot be read as a LanceDB knowledge base .*chunks.*not found"):
        await Store.open(db)
    assert 0.3 <= time.monotonic() - started < 5
