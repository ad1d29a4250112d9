"""A watched folder's changes are searchable at once; compaction waits for a quiet moment.

Compacting rewrites all five tables (~140 ms of each applied change when it ran every time), so
the watcher runs it once changes stop for `watch.optimize_idle_seconds`; meanwhile full-text and
vector search read the rows written since, unindexed. And a batch of deleted files goes in one
commit per table. A real `serve --http --watch` process, a real MCP client, the LanceDB folder
read as it is on disk.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import lancedb
import pytest

from tests.conftest import run_cli
from tests.mcp_helpers import http_server
from tests.watch.polling import eventually

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(600)]

DELETED = 20
#: Six tables, a delete each, and slack: a batch is not a few commits per document.
MOST_VERSIONS = 14


def note(path: Path, title: str, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# {title}\n\n{body}\n")
    return path


async def unindexed_chunks(db: Path) -> int:
    """Rows of the chunks table the full-text index does not cover yet."""
    connection = await lancedb.connect_async(str(db))
    table = await connection.open_table("chunks")
    try:
        [fts] = [ix for ix in await table.list_indices() if ix.columns == ["content_fts"]]
        stats = await table.index_stats(fts.name)
        assert stats is not None
        return int(stats.num_unindexed_rows)
    finally:
        table.close()


def versions(db: Path) -> int:
    return sum(1 for _ in db.glob("*.lance/_versions/*.manifest"))


def synced(tmp_path: Path, env: dict[str, str]) -> tuple[Path, Path]:
    folder, db = tmp_path / "folder", tmp_path / "kb.lancedb"
    note(folder / "alpha.md", "Alpha", "The lighthouse keeper counts albatrosses.")
    for n in range(DELETED):
        note(folder / "batch" / f"n{n:02d}.md", f"Note {n}", f"Berth {n} was dredged to {n + 5} metres.")
    assert run_cli("--db", str(db), "sync", str(folder), env=env).returncode == 0
    return folder, db


async def found(client: object, word: str) -> bool:
    hits = (await client.call_tool("search", {"query": word})).structured_content["results"]  # type: ignore[attr-defined]
    return any(word in hit["content"] for hit in hits)


async def test_new_rows_are_searched_unindexed_until_idle(tmp_path: Path) -> None:
    env = {"XDG_DATA_HOME": str(tmp_path / "data"), "MCP_ANALYSIS_WATCH__SETTLE_SECONDS": "0.3"}
    folder, db = synced(tmp_path, env)
    assert await unindexed_chunks(db) == 0  # `sync` compacts at its end
    quiet = {**env, "MCP_ANALYSIS_WATCH__OPTIMIZE_IDLE_SECONDS": "3600"}
    (folder / "batch" / "n00.md").unlink()  # a change for the start-up mirror to log (then it compacts)
    with http_server(db, "--watch", str(folder), env=quiet, log_dir=tmp_path) as server:
        await eventually(lambda: _started(server.log), "the watcher's start-up mirror")
        async with server.client() as client:
            note(folder / "quetzal.md", "Quetzal", "A quetzal nests in the harbour crane.")
            await eventually(lambda: found(client, "quetzal"), "a new file is searchable")
            assert await unindexed_chunks(db) > 0  # found by full-text search, yet outside its index
            before = versions(db)
            for path in (folder / "batch").iterdir():
                path.unlink()
            await eventually(lambda: _gone(client, "Berth 7 was dredged"), "the deleted files' documents go")
            assert versions(db) - before <= MOST_VERSIONS, versions(db) - before
    eager = {**env, "MCP_ANALYSIS_WATCH__OPTIMIZE_IDLE_SECONDS": "0.5"}
    (folder / "alpha.md").unlink()
    with http_server(db, "--watch", str(folder), env=eager, log_dir=tmp_path) as server:
        await eventually(lambda: _started(server.log), "the watcher's start-up mirror")
        note(folder / "wren.md", "Wren", "A wren sings on the breakwater.")
        async with server.client() as client:
            await eventually(lambda: found(client, "wren"), "a new file is searchable")
        await eventually(lambda: _indexed(db), "the rows are indexed once the watcher is idle")


async def _gone(client: object, text: str) -> bool:
    hits = (await client.call_tool("search", {"query": text})).structured_content["results"]  # type: ignore[attr-defined]
    return not any(text in hit["content"] for hit in hits)


async def _indexed(db: Path) -> bool:
    return await unindexed_chunks(db) == 0


async def _started(log: Path) -> bool:
    return b"watch (start)" in log.read_bytes()


async def test_a_folder_that_never_goes_quiet_is_compacted_all_the_same(tmp_path: Path) -> None:
    """Files saved every fraction of a second (a log rotating, an autosaving editor) never leave the
    watcher idle: compaction still runs once changes have waited 30 idle periods."""
    env = {"XDG_DATA_HOME": str(tmp_path / "data"), "MCP_ANALYSIS_WATCH__SETTLE_SECONDS": "0.1"}
    folder, db = synced(tmp_path, env)
    busy = {  # a new file every 0.1 s, each seen 0.05 s after it was written; overdue after 7.5 s
        **env,
        "MCP_ANALYSIS_WATCH__OPTIMIZE_IDLE_SECONDS": "0.25",
        "MCP_ANALYSIS_WATCH__DEBOUNCE_SECONDS": "0.05",
    }
    (folder / "batch" / "n00.md").unlink()  # a change for the start-up mirror to log
    with http_server(db, "--watch", str(folder), env=busy, log_dir=tmp_path) as server:
        await eventually(lambda: _started(server.log), "the watcher's start-up mirror")
        compacted = False
        async with anyio.create_task_group() as group:

            async def keep_saving() -> None:
                n = 0
                while not compacted:
                    n += 1
                    note(folder / f"journal-{n}.md", "Journal", f"Entry {n}: the tide turned at {n % 12} o'clock.")
                    await anyio.sleep(0.1)

            group.start_soon(keep_saving)
            await eventually(lambda: _has_unindexed(db), "a saved file's rows, unindexed")
            await eventually(lambda: _indexed(db), "compaction while the file is still being saved", seconds=120)
            compacted = True
        # The overdue rule compacted (not a pause in the saving long enough to count as quiet).
        assert b"compacting without a quiet moment" in server.log.read_bytes()


async def _has_unindexed(db: Path) -> bool:
    return await unindexed_chunks(db) > 0
