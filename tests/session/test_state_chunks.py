"""A kept session's interpreter state costs writes in proportion to what a call changed.

Through a real `serve --http` process and real MCP clients, on the real directory store and on a
real redis-server: a session holding a few MB of variables writes no state on `search` nor on an
`execute_code` that only looks, a few chunks on one that changes something (never the whole dump
again), a failing call still rolls back to the last change, and every kept session survives a
SIGKILL of the server. On the stores directly: records an earlier version kept whole
still load, a changed chunk is refused, chunks a record no longer lists are collected.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis as redis_client

from mcp_analysis.session.keys import SessionKey
from mcp_analysis.session.state import AnalysisState
from mcp_analysis.session.stores.base import Limits, SessionRecord, Signer
from mcp_analysis.session.stores.chunks import DumpMemo, split
from mcp_analysis.session.stores.file import FileSessionStore
from tests.adversarial.redis_cluster import store_env
from tests.mcp_helpers import HttpServer, http_server, text
from tests.services import redis
from tests.session.disk_writes import files, written

pytestmark = pytest.mark.anyio

# ~3 MB of distinct text in the dump (repeated text would chunk into a handful of shared chunks).
LARGE = "rows = [('row %d of the kept table ' % i) * 4 for i in range(30000)]"
LIMITS = Limits(ttl_seconds=600, max_stored=100, max_per_principal=100, max_stored_bytes=10**9)
SECRET = b"chunk-test-secret-0123456789abcdef"
MB = 1 << 20


def state_bytes(directory: Path) -> int:
    return sum(entry[2] for path, entry in files(directory).items() if path.suffix not in (".json", ".kept"))


async def keep(server: HttpServer, code: str) -> str:
    async with server.client() as client:
        result = await client.call_tool("execute_code", {"code": code})
        assert not result.is_error and result.structured_content["success"], text(result)
        return str(result.structured_content["session"])


async def call(server: HttpServer, tool: str, arguments: dict[str, object]) -> object:
    async with server.client() as client:
        result = await client.call_tool(tool, arguments)
        assert not result.is_error, text(result)
        return result.structured_content


@pytest.fixture
def directory_server(sample_db: Path, tmp_path: Path) -> Iterator[tuple[HttpServer, Path]]:
    sessions = tmp_path / "sessions"
    env = {"XDG_DATA_HOME": str(tmp_path / "data"), "MCP_ANALYSIS_SESSIONS__DIR": str(sessions)}
    with http_server(sample_db, env=env, log_dir=tmp_path) as server:
        yield server, sessions


async def test_search_and_a_read_only_call_do_not_rewrite_a_large_state(
    directory_server: tuple[HttpServer, Path],
) -> None:
    server, sessions = directory_server
    handle = await keep(server, LARGE)
    dump = state_bytes(sessions)
    assert dump > 2 * MB, dump
    before = files(sessions)
    found = await call(server, "search", {"query": "revenue", "session": handle})
    hit = found["results"][0]  # type: ignore[index]
    await call(server, "cite", {"chunk_ids": [hit["chunk_id"]], "session": handle})
    after_search = files(sessions)
    state_files = {p for p in after_search if p.suffix not in (".json", ".kept") and before.get(p) != after_search[p]}
    assert not state_files, sorted(p.name for p in state_files)  # the record alone was written, twice
    assert written(before, after_search) < 256 * 1024
    result = await call(server, "execute_code", {"code": "len(rows)", "session": handle})
    assert result["value"] == "30000"  # type: ignore[index]
    # A call that only looks is not dumped again (sandbox/readonly.py): no state, only the record.
    after_look = files(sessions)
    state_files = {p for p in after_look if p.suffix not in (".json", ".kept") and after_search.get(p) != after_look[p]}
    assert not state_files, sorted(p.name for p in state_files)
    changed = await call(server, "execute_code", {"code": "rows[0] = 'changed'", "session": handle})
    assert changed["success"]  # type: ignore[index]
    # A call that changes something: a few chunks around the change (its source is kept in the dump too).
    assert 0 < written(after_look, files(sessions)) < dump // 10
    assert state_bytes(sessions) < dump * 1.1  # the chunks no longer listed went


async def test_a_failing_call_after_calls_that_only_looked_rolls_back_to_the_last_change(
    directory_server: tuple[HttpServer, Path],
) -> None:
    """Calls that only look are not dumped: the rollback point stays the last call that changed something."""
    server, _ = directory_server
    handle = await keep(server, LARGE)
    for code in ("rows.append('added')", "len(rows)", "rows[-1]", "print(len(rows), rows[-1])"):
        result = await call(server, "execute_code", {"code": code, "session": handle})
        assert result["success"], result  # type: ignore[index]
    blown = await call(server, "execute_code", {"code": "gone = 1\nblob = 'x' * (8 * 1024 ** 3)", "session": handle})
    assert not blown["success"] and "sandbox.max_memory_mb" in blown["error"]  # type: ignore[index]
    after = await call(server, "execute_code", {"code": "(len(rows), rows[-1])", "session": handle})
    assert after["value"] == "(30001, 'added')", after  # type: ignore[index]
    undone = await call(server, "execute_code", {"code": "gone", "session": handle})
    assert "NameError" in undone["error"], undone  # type: ignore[index]


async def test_every_kept_session_survives_a_sigkill(sample_db: Path, tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    env = {"XDG_DATA_HOME": str(tmp_path / "data"), "MCP_ANALYSIS_SESSIONS__DIR": str(sessions)}
    handles: dict[str, int] = {}
    with http_server(sample_db, env=env, log_dir=tmp_path) as server:
        for n in range(3):
            handle = await keep(server, f"{LARGE}\ntotal = {n}")
            for step in range(3):
                code = f"total = total + 10\nrows[{step}] = 'x'"
                await call(server, "execute_code", {"code": code, "session": handle})
            handles[handle] = n + 30
        os.kill(server.process.pid, signal.SIGKILL)
        server.process.wait()
    with http_server(sample_db, env=env, log_dir=tmp_path) as server:
        for handle, total in handles.items():
            result = await call(server, "execute_code", {"code": "(total, len(rows), rows[0])", "session": handle})
            assert result["value"] == f"({total}, 30000, 'x')", result  # type: ignore[index]


def record(key: SessionKey, marker: str) -> SessionRecord:
    state = AnalysisState(citations=[marker])
    return SessionRecord(key=key.storage, session_id=key.value, owner="alice", state=state, last_used=0.0)


def dump(n: int) -> bytes:
    return b"".join(b"line %d of dump %d\n" % (i, n) for i in range(40000))


async def test_a_record_an_earlier_version_kept_whole_still_loads(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path, SECRET)
    key = SessionKey.handle("s_0123456789abcdefghijklmn")
    body = record(key, "kept-whole").model_dump_json().encode()
    blob = dump(1)
    await store.save(record(key, "probe"), b"probe", expected=0, limits=LIMITS)  # names the files by the key
    [base] = tmp_path.glob("*.json")  # overwritten below as an earlier version wrote its records
    head = {"version": 4, "owner": "x", "mac": Signer(SECRET).mac(body, blob)}
    base.write_bytes(json.dumps(head).encode() + b"\n" + body)
    base.with_suffix(".bin").write_bytes(blob)
    reader = FileSessionStore(tmp_path, SECRET)
    stored = await reader.load(key)
    assert stored is not None and stored.blob == blob and stored.version == 4
    assert stored.record.state.citations == ["kept-whole"]
    # Its next save keeps it as chunks, and the whole dump goes.
    memo = DumpMemo()
    assert await reader.save(stored.record, blob, expected=4, limits=LIMITS, memo=memo) == 5
    assert not base.with_suffix(".bin").exists()
    again = await FileSessionStore(tmp_path, SECRET).load(key)
    assert again is not None and again.blob == blob and again.split is not None


async def test_a_changed_chunk_is_refused_and_unlisted_chunks_are_collected(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path, SECRET)
    key = SessionKey.handle("s_0123456789abcdefghijklmn")
    memo = DumpMemo()
    assert await store.save(record(key, "a"), dump(1), expected=0, limits=LIMITS, memo=memo) == 1
    first = set((next(tmp_path.glob("*.chunks"))).iterdir())
    # A save with a changed dump writes only new chunks and drops those the record no longer lists.
    assert await store.save(record(key, "a"), dump(1)[:-100] + b"changed", expected=1, limits=LIMITS, memo=memo) == 2
    folder = next(tmp_path.glob("*.chunks"))
    now = set(folder.iterdir())
    assert memo.split is not None and {p.name for p in now} == set(memo.split.names)
    assert 0 < len(now - first) <= 3, len(now - first)
    loaded = await store.load(key)
    assert loaded is not None and loaded.blob == dump(1)[:-100] + b"changed"
    # A chunk changed on disk fails its name: the session is not loaded.
    victim = sorted(now)[len(now) // 2]
    victim.write_bytes(b"X" + victim.read_bytes()[1:])
    assert await FileSessionStore(tmp_path, SECRET).load(key) is None


@pytest.fixture(scope="module")
def redis_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    with redis(tmp_path_factory.mktemp("chunks-redis")) as running:
        yield running


def received(port: int) -> int:
    admin = redis_client.Redis(port=port)
    try:
        return int(admin.info("stats")["total_net_input_bytes"])
    finally:
        admin.close()


async def test_redis_receives_no_state_on_search_and_a_few_chunks_on_a_change(
    sample_db: Path, tmp_path: Path, redis_port: int
) -> None:
    env = store_env(redis_port, tmp_path)
    with http_server(sample_db, env=env, log_dir=tmp_path) as server:
        before = received(redis_port)
        handle = await keep(server, LARGE)
        first = received(redis_port) - before
        assert first > 2 * MB, first
        before = received(redis_port)
        await call(server, "search", {"query": "budget", "session": handle})
        assert received(redis_port) - before < 256 * 1024
        before = received(redis_port)
        result = await call(server, "execute_code", {"code": "rows[1] = 'y'\nlen(rows)", "session": handle})
        assert result["value"] == "30000"  # type: ignore[index]
        assert 0 < received(redis_port) - before < first // 10
    # Another replica (a new process) reads the session from its chunks.
    with http_server(sample_db, env=env, log_dir=tmp_path) as server:
        result = await call(server, "execute_code", {"code": "rows[2][:12]", "session": handle})
        assert result["value"] == "'row 2 of the'"  # type: ignore[index]


def test_a_split_from_the_previous_dump_is_the_split_a_fresh_cut_makes() -> None:
    # Taking the previous dump's chunks where the bytes are the same must cut where FastCDC would.
    signer = Signer(SECRET)
    before = dump(1)
    after = before[:100] + b"inserted near the start" + before[100:-50] + b"and a new tail"
    previous = split(before, signer.chunk_name)
    reused, fresh = split(after, signer.chunk_name, previous), split(after, signer.chunk_name)
    assert reused.names == fresh.names and reused.ends == fresh.ends
    assert b"".join(bytes(piece) for _, piece in reused.pieces()) == after
    assert len(set(reused.names) - set(previous.names)) <= 3


async def test_chunks_a_killed_delete_left_behind_go_with_the_expiry_pass(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path, SECRET)
    key = SessionKey.handle("s_0123456789abcdefghijklmn")
    await store.save(record(key, "a"), dump(1), expected=0, limits=LIMITS)
    [folder] = tmp_path.glob("*.chunks")
    folder.with_suffix(".json").unlink()  # what a process killed inside delete() leaves
    assert await store.expire(3600) == 0
    assert folder.exists()  # as fresh as a new session's chunks another process writes before its record
    an_hour_and_more = time.time() - 3700
    os.utime(folder, (an_hour_and_more, an_hour_and_more))
    assert await store.expire(3600) == 0
    assert not folder.exists()
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == [
        folder.with_suffix(".kept").name
    ]
