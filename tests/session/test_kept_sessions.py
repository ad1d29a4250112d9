"""Kept sessions: anonymous calls with nothing worth keeping leave nothing behind; bounds.

Through a real `serve --http` process and real MCP clients. A session is kept only once it
holds something worth keeping: were every session kept, each anonymous `search` call would
leave a session file on disk (300 calls, 300 files).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from mcp_analysis.config import Settings
from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.errors import SessionLimitError
from mcp_analysis.sandbox.pool import WorkerPool
from mcp_analysis.session.keys import SessionKey
from mcp_analysis.session.manager import SessionManager
from tests.conftest import SAMPLE_DOCUMENTS, make_settings
from tests.mcp_helpers import HttpServer, http_server, text

pytestmark = pytest.mark.anyio

ANONYMOUS_LIMIT = 3


@pytest.fixture(scope="module")
def sessions_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("kept-sessions")


@pytest.fixture(scope="module")
def http(sample_db: Path, sessions_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    logs = tmp_path_factory.mktemp("logs")
    env = {
        "XDG_DATA_HOME": str(logs / "data"),
        "MCP_ANALYSIS_SESSIONS__DIR": str(sessions_dir),
        # The total bound: anonymous clients are not one principal (max_per_principal stays tiny
        # to show it does not apply to them).
        "MCP_ANALYSIS_SESSIONS__MAX_STORED": str(ANONYMOUS_LIMIT),
        "MCP_ANALYSIS_SESSIONS__MAX_PER_PRINCIPAL": "1",
    }
    with http_server(sample_db, log_dir=logs, env=env) as server:
        yield server


def kept_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.json"))


async def test_anonymous_search_calls_keep_no_sessions(http: HttpServer, sessions_dir: Path) -> None:
    handles = set()
    async with http.client() as client:
        assert client.protocol_version == "2026-07-28"
        for n in range(60):
            result = await client.call_tool("search", {"query": f"revenue quarter {n}", "limit": 2})
            assert not result.is_error and result.structured_content["results"]
            handles.add(result.structured_content["session"])
        listed = await client.call_tool("list_documents", {})
        assert listed.structured_content["total"] == SAMPLE_DOCUMENTS
    assert len(handles) == 60  # each anonymous call had its own session...
    await anyio.sleep(1.5)  # past a periodic (1 s) background write: nothing is written later either
    assert kept_files(sessions_dir) == []  # ...and none of them was kept


async def test_a_handle_from_a_search_only_call_can_be_passed_back(http: HttpServer, sessions_dir: Path) -> None:
    async with http.client() as client:
        found = await client.call_tool("search", {"query": "phishing campaign", "limit": 1})
        handle = found.structured_content["session"]
        chunk = found.structured_content["results"][0]["chunk_id"]
        # The session was not kept, but its handle still works: the client loses nothing.
        cited = await client.call_tool("cite", {"chunk_ids": [chunk], "session": handle})
        assert not cited.is_error, text(cited)
        assert cited.structured_content["session"] == handle and cited.structured_content["total_cited"] == 1
        again = await client.call_tool("analysis_state", {"session": handle})
        assert [c["chunk_id"] for c in again.structured_content["citations"]] == [chunk]
        # A mangled handle is not mistaken for one of ours.
        mangled = handle[:-3] + ("AAA" if not handle.endswith("AAA") else "BBB")
        wrong = await client.call_tool("analysis_state", {"session": mangled})
        assert wrong.is_error and "Unknown or expired" in text(wrong)
        await client.call_tool("new_analysis", {"session": handle})  # leave the bound test room


async def test_kept_sessions_are_bounded_with_a_clear_error(http: HttpServer, sessions_dir: Path) -> None:
    already = len(kept_files(sessions_dir))  # what earlier tests of this module kept
    room = ANONYMOUS_LIMIT - already
    assert room >= 1
    async with http.client() as client:
        hit = (await client.call_tool("search", {"query": "revenue", "limit": 1})).structured_content["results"][0]
        # Each anonymous `cite` without a session registers a citation in a new session: kept.
        # (cite keeps a session without running code: this test depends on the bound alone.)
        results = [await client.call_tool("cite", {"chunk_ids": [hit["chunk_id"]]}) for _ in range(room + 1)]
        assert [r.is_error for r in results] == [False] * room + [True]
        message = text(results[-1])
        assert "The server keeps too many analysis sessions" in message
        assert f"limit {ANONYMOUS_LIMIT}" in message and "sessions.max_stored" in message
        # A kept session continues; calls that keep nothing still work when full.
        handle = results[0].structured_content["session"]
        again = await client.call_tool("analysis_state", {"session": handle})
        assert [c["chunk_id"] for c in again.structured_content["citations"]] == [hit["chunk_id"]]
        assert not (await client.call_tool("search", {"query": "revenue", "limit": 1})).is_error
    assert len(kept_files(sessions_dir)) == ANONYMOUS_LIMIT


async def test_total_bound_and_expired_handles(sample_db: Path, tmp_path: Path) -> None:
    settings: Settings = make_settings(
        sample_db, sessions={"dir": tmp_path / "sessions", "max_stored": 2, "max_per_principal": 100}
    )
    kb = await KnowledgeBase.open(settings)
    async with WorkerPool(settings.sandbox) as pool, SessionManager(kb, pool, settings) as manager:
        first = await manager.create_handle(document_filter=None, owner=None)
        await first.execute("a = 1")
        second = await manager.create_handle(document_filter=None, owner="alice")
        await second.execute("b = 2")
        third = await manager.create_handle(document_filter=None, owner="bob")
        with pytest.raises(SessionLimitError, match=r"too many analysis sessions \(limit 2, sessions.max_stored\)"):
            await third.execute("c = 3")
        assert len(kept_files(tmp_path / "sessions")) == 2
        # An expired kept session is reported as expired, not silently restarted.
        await manager.drop(SessionKey.handle(first.id))
        with pytest.raises(Exception, match="Unknown or expired"):
            await manager.resolve(first.id, owner=None, document_filter=None)
    await kb.close()


async def test_anonymous_clients_are_bounded_by_the_total_not_as_one_principal(sample_db: Path, tmp_path: Path) -> None:
    # Without tokens every client is anonymous: counting them as one principal would make
    # max_per_principal a second, smaller total (1,000 of 10,000 by default).
    sessions = {"dir": tmp_path / "sessions", "max_stored": 10, "max_per_principal": 1}
    settings: Settings = make_settings(sample_db, sessions=sessions)
    kb = await KnowledgeBase.open(settings)
    async with WorkerPool(settings.sandbox) as pool, SessionManager(kb, pool, settings) as manager:
        for n in range(3):
            await (await manager.create_handle(document_filter=None, owner=None)).execute(f"a = {n}")
        await (await manager.create_handle(document_filter=None, owner="alice")).execute("b = 1")
        second = await manager.create_handle(document_filter=None, owner="alice")
        with pytest.raises(SessionLimitError, match=r"principal 'alice' \(limit 1, sessions.max_per_principal\)"):
            await second.execute("b = 2")
        assert len(kept_files(tmp_path / "sessions")) == 4
    await kb.close()
