"""Analysis sessions against other principals, tampered records, a shared Redis and HTTP session ids:
a session is only ever reached by its owner, under the filter it was made with, and stays bounded.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mcp_analysis.config import Settings
from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.errors import SandboxError, SessionNotFoundError
from mcp_analysis.sandbox.pool import WorkerPool
from mcp_analysis.session.keys import SessionKey
from mcp_analysis.session.manager import SessionManager
from tests.conftest import make_settings
from tests.mcp_helpers import HttpServer, text
from tests.services import redis

pytestmark = pytest.mark.anyio

MB = 1_000_000


@pytest.fixture
async def manager_parts(sample_db: Path, tmp_path: Path) -> AsyncIterator[tuple[KnowledgeBase, WorkerPool, Settings]]:
    settings = make_settings(sample_db, sessions={"dir": tmp_path / "sessions"})
    kb = await KnowledgeBase.open(settings)
    async with WorkerPool(settings.sandbox) as pool:
        yield kb, pool, settings
    await kb.close()


async def test_a_principal_whose_filter_changed_starts_afresh(
    manager_parts: tuple[KnowledgeBase, WorkerPool, Settings],
) -> None:
    # The operator narrows alice's token filter and restarts. Her kept session (made under the
    # wider filter) must not come back, and must not block her either: if it refused her new
    # session's saves as "changed by another call ... Retry", each attempt would refresh its TTL
    # and she could never work again.
    kb, pool, settings = manager_parts
    async with SessionManager(kb, pool, settings) as manager:
        before = await manager.get(SessionKey.principal("alice"), document_filter=None, owner="alice")
        assert (await before.execute("seen = len(await list_documents())")).success
    narrowed = "uri LIKE '%advisory%'"
    async with SessionManager(kb, pool, settings) as manager:
        session = await manager.get(SessionKey.principal("alice"), document_filter=narrowed, owner="alice")
        first = await session.execute("seen")
        assert not first.success and "NameError" in (first.error or "")
        assert "kept under another document filter" in first.stderr, first
        assert (await session.execute("mine = len(await list_documents())")).success
    async with SessionManager(kb, pool, settings) as manager:
        again = await manager.get(SessionKey.principal("alice"), document_filter=narrowed, owner="alice")
        assert (await again.execute("mine")).value == "4"


async def test_a_session_id_cannot_be_squatted_by_another_principal(
    manager_parts: tuple[KnowledgeBase, WorkerPool, Settings],
) -> None:
    # Bob, given alice's session id (it is in her resource URIs), passes it as `session`. The id
    # looks like one this server issued, so a fresh session under it must not be his: he would
    # hold alice's id, and her own id would then answer her "Unknown or expired".
    kb, pool, settings = manager_parts
    async with SessionManager(kb, pool, settings) as manager:
        alice = await manager.get(SessionKey.principal("alice"), document_filter=None, owner="alice")
        assert (await alice.execute("mine = 1")).success
        searched = await manager.get(SessionKey.principal("carol"), document_filter=None, owner="carol")
        await searched.search("revenue")  # never kept: nothing worth keeping
        anonymous = await manager.create_handle(document_filter=None, owner=None)
    async with SessionManager(kb, pool, settings) as manager:
        for victim in (alice.id, searched.id):
            with pytest.raises(SessionNotFoundError, match="Unknown or expired"):
                await manager.resolve(victim, owner="bob", document_filter=None)
            with pytest.raises(SessionNotFoundError):
                await manager.resolve(victim, owner=None, document_filter=None)
        own = await manager.resolve(alice.id, owner="alice", document_filter=None)
        assert (await own.execute("mine")).value == "1"
        assert (await manager.resolve(searched.id, owner="carol", document_filter=None)).id == searched.id
        # An anonymous handle is the client's credential: passed back, it still starts afresh.
        assert (await manager.resolve(anonymous.id, owner=None, document_filter=None)).id == anonymous.id
        with pytest.raises(SessionNotFoundError):
            await manager.resolve(anonymous.id, owner="bob", document_filter=None)


async def test_a_kept_session_does_not_grow_without_bound(
    manager_parts: tuple[KnowledgeBase, WorkerPool, Settings], tmp_path: Path
) -> None:
    # Code is bounded (sandbox.max_code_chars) and the kept history is too: unbounded, each 2 MB
    # program would add 4 MB to the kept session (its text in the state, its source in the
    # interpreter dump), written through on every call; 200 such calls would make one session
    # 800 MB on disk or in Redis (and a shared Redis evicts others' sessions).
    kb, pool, settings = manager_parts
    async with SessionManager(kb, pool, settings) as manager:
        session = await manager.create_handle(document_filter=None, owner=None)
        assert (await session.execute("keep = 1")).success
        with pytest.raises(SandboxError, match=r"2,000,009 characters; at most 100,000 \(sandbox.max_code_chars\)"):
            await session.execute("x = 1\n# " + "y" * 2_000_000 + "\n")
        big_output = "print('z' * 40_000)\n# " + "c" * 90_000
        for _ in range(40):
            assert (await session.execute(big_output)).success
        kept = sum(path.stat().st_size for path in (tmp_path / "sessions").glob("*.json"))
        assert kept < 3 * MB, f"{kept:,} bytes of state kept"
        state = session.state
        assert state.executions[-1].index == state.execution_counter == 41  # the refused call ran nothing
        assert len(state.executions) < 40 and (await session.execute("keep")).value == "1"


@pytest.fixture(scope="module")
def redis_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    with redis(tmp_path_factory.mktemp("redis")) as port:
        yield port


def redis_settings(db: Path, port: int, secret: str, **sessions: Any) -> Settings:
    return make_settings(db, sessions={"store": f"redis://127.0.0.1:{port}/0", "secret": secret, **sessions})


async def test_deployments_sharing_a_redis_never_meet(sample_db: Path, redis_port: int, tmp_path: Path) -> None:
    # Two deployments whose knowledge bases have the same path (each in its own container) and
    # one Redis: each has its own namespace (path and signing key). Keyed by the path alone, the
    # other's record of `principal:alice` would fail our signature and block alice's saves, and
    # the other's sessions would fill this one's bounds.
    db = tmp_path / "kb.lancedb"
    db.symlink_to(sample_db, target_is_directory=True)
    ours = redis_settings(db, redis_port, "ours-0123456789abcdef", max_stored=1)
    theirs = redis_settings(db, redis_port, "theirs-0123456789abcdef", max_stored=1)
    kb = await KnowledgeBase.open(ours)
    async with WorkerPool(ours.sandbox) as pool:
        async with SessionManager(kb, pool, theirs) as other:
            them = await other.get(SessionKey.principal("alice"), document_filter=None, owner="alice")
            assert (await them.execute("where = 'theirs'")).success
        async with SessionManager(kb, pool, ours) as manager:
            us = await manager.get(SessionKey.principal("alice"), document_filter=None, owner="alice")
            first = await us.execute("where = 'ours'")
            assert first.success and "not restored" not in first.stderr, first
        async with SessionManager(kb, pool, theirs) as other:
            them = await other.get(SessionKey.principal("alice"), document_filter=None, owner="alice")
            assert (await them.execute("where")).value == "'theirs'"
    await kb.close()


async def test_a_tampered_principal_record_is_replaced_not_fatal(
    sample_db: Path, redis_port: int, tmp_path: Path
) -> None:
    # A record that fails its signature is never loaded, and for a principal's own key it is
    # replaced: left in place, it would refuse every later save ("changed by another call ...
    # Retry") until it expired, and each attempt would refresh its TTL.
    import redis.asyncio as aioredis

    from mcp_analysis.session.stores.redis import RedisSessionStore

    db = tmp_path / "tampered.lancedb"
    db.symlink_to(sample_db, target_is_directory=True)
    settings = redis_settings(db, redis_port, "tamper-0123456789abcdef")
    kb = await KnowledgeBase.open(settings)
    async with WorkerPool(settings.sandbox) as pool:
        async with SessionManager(kb, pool, settings) as manager:
            session = await manager.get(SessionKey.principal("grace"), document_filter=None, owner="grace")
            assert (await session.execute("secret_value = 7")).success
            assert isinstance(manager.store, RedisSessionStore)
            key = manager.store.redis_key(SessionKey.principal("grace"))
        client = aioredis.Redis(port=redis_port)
        record = await client.hget(key, "rec")  # encrypted: one flipped byte stands for any change
        await client.hset(key, "rec", record[:-1] + bytes([record[-1] ^ 1]))
        await client.aclose()
        async with SessionManager(kb, pool, settings) as manager:
            again = await manager.get(SessionKey.principal("grace"), document_filter=None, owner="grace")
            fresh = await again.execute("secret_value")
            assert "NameError" in (fresh.error or "") and "could not be verified" in fresh.stderr
            assert (await again.execute("secret_value = 8")).success
        async with SessionManager(kb, pool, settings) as manager:
            restored = await manager.get(SessionKey.principal("grace"), document_filter=None, owner="grace")
            assert (await restored.execute("secret_value")).value == "8"
    await kb.close()


async def test_another_principal_cannot_take_a_sessions_lock(sample_db: Path, redis_port: int, tmp_path: Path) -> None:
    # Bob, given alice's session id, is refused before his call takes alice's cross-replica lock:
    # if each of his calls took it first, enough parallel calls would keep alice waiting, then "busy".
    from mcp_analysis.errors import SessionBusyError
    from mcp_analysis.session.scope import call_scope

    db = tmp_path / "locks.lancedb"
    db.symlink_to(sample_db, target_is_directory=True)
    settings = redis_settings(db, redis_port, "locks-0123456789abcdef", lock_timeout=1.0)
    kb = await KnowledgeBase.open(settings)
    async with WorkerPool(settings.sandbox) as pool, SessionManager(kb, pool, settings) as manager:
        alice = await manager.get(SessionKey.principal("alice"), document_filter=None, owner="alice")
        assert (await alice.execute("mine = 1")).success
        anonymous = await manager.create_handle(document_filter=None, owner=None)
        assert (await anonymous.execute("theirs = 2")).success
        async with call_scope():  # alice's call is running and holds her lock
            await manager.get(SessionKey.principal("alice"), document_filter=None, owner="alice")
            await manager.resolve(anonymous.id, owner=None, document_filter=None)
            for victim in (alice.id, anonymous.id):
                async with call_scope():
                    # Not SessionBusyError after waiting; and named by the id given, not by whose it is.
                    with pytest.raises(SessionNotFoundError, match=f"session '{victim}'"):
                        await manager.resolve(victim, owner="bob", document_filter=None)
        async with call_scope():
            with pytest.raises(SessionBusyError):  # the lock is real: the owner's second call waits
                async with call_scope():
                    await manager.get(SessionKey.principal("alice"), document_filter=None, owner="alice")
                    async with call_scope():
                        await manager.get(SessionKey.principal("alice"), document_filter=None, owner="alice")
    await kb.close()


async def test_a_malformed_handle_never_reaches_the_session_store(
    sample_db: Path, redis_port: int, tmp_path: Path
) -> None:
    # Handles are short; anything else is unknown without asking Redis. Otherwise a 1 MB `session`
    # argument would become a 1 MB Redis key: a lock taken and released, a lookup, on every call.
    import redis.asyncio as aioredis

    from mcp_analysis.session.scope import call_scope

    db = tmp_path / "handles.lancedb"
    db.symlink_to(sample_db, target_is_directory=True)
    settings = redis_settings(db, redis_port, "handles-0123456789abcdef")
    kb = await KnowledgeBase.open(settings)
    client = aioredis.Redis(port=redis_port)
    async with WorkerPool(settings.sandbox) as pool, SessionManager(kb, pool, settings) as manager:
        before = await client.info("commandstats")
        for handle in ("x" * 1_000_000, "s_" + "A" * 500, "s_bad handle\x00"):
            async with call_scope():
                with pytest.raises(SessionNotFoundError):
                    await manager.resolve(handle, owner=None, document_filter=None)
        after = await client.info("commandstats")
    await client.aclose()
    await kb.close()
    for command in ("cmdstat_set", "cmdstat_evalsha", "cmdstat_hgetall", "cmdstat_exists"):
        assert after.get(command, {}).get("calls", 0) == before.get(command, {}).get("calls", 0), command


def session_id_recorder(server: HttpServer, seen: list[str], **kwargs: Any) -> Client:
    """A client whose legacy `mcp-session-id` (issued by the server) is recorded in `seen`."""

    async def record(response: httpx2.Response) -> None:
        sid = response.headers.get("mcp-session-id")
        if sid and sid not in seen:
            seen.append(sid)

    http = httpx2.AsyncClient(timeout=httpx2.Timeout(60.0), event_hooks={"response": [record]})
    return Client(streamable_http_client(server.url, http_client=http), **kwargs)


async def test_a_modern_request_cannot_ride_a_legacy_session(two_worker_http: HttpServer) -> None:
    seen: list[str] = []
    async with session_id_recorder(two_worker_http, seen, mode="legacy") as legacy:
        await legacy.call_tool("execute_code", {"code": "secret = 'legacy-only'"})
        assert len(seen) == 1
        stolen_header = httpx2.AsyncClient(timeout=httpx2.Timeout(60.0), headers={"mcp-session-id": seen[0]})
        async with Client(streamable_http_client(two_worker_http.url, http_client=stolen_header)) as attacker:
            assert attacker.protocol_version == "2026-07-28"
            probe = await attacker.call_tool("execute_code", {"code": "secret"})
            assert "legacy-only" not in text(probe)
            assert "NameError" in probe.structured_content["error"]
            state = await attacker.call_tool("analysis_state", {})
            own = await legacy.call_tool("analysis_state", {})
            assert state.structured_content["session"] != own.structured_content["session"]
        assert (await legacy.call_tool("execute_code", {"code": "secret"})).structured_content[
            "value"
        ] == "'legacy-only'"


async def test_an_ended_legacy_session_frees_its_analysis(two_worker_http: HttpServer) -> None:
    """The SDK's real path: the client ends its HTTP session (DELETE) and the server drops its analysis."""
    async with two_worker_http.client() as other:
        async with two_worker_http.client(mode="legacy") as legacy:
            first = await legacy.call_tool("execute_code", {"code": "x = 41"})
            analysis_id = first.structured_content["session"]
            live = await other.call_tool("execute_code", {"code": "x + 1", "session": analysis_id})
            assert live.structured_content["value"] == "42"  # live: readable by its handle
        with anyio.fail_after(20):
            while True:
                probe = await other.call_tool("execute_code", {"code": "x + 1", "session": analysis_id})
                if probe.is_error:
                    break
                await anyio.sleep(0.2)
        assert "Unknown or expired analysis session" in text(probe)
