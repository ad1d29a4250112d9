"""Charts are kept with the session in either store, and count toward its stored size."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_analysis.config import Settings
from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.errors import SessionLimitError
from mcp_analysis.sandbox.pool import WorkerPool
from mcp_analysis.session.keys import SessionKey
from mcp_analysis.session.manager import SessionManager
from tests.conftest import make_settings
from tests.services import redis

pytestmark = pytest.mark.anyio

ALICE = SessionKey.principal("alice")
DRAW = (
    "rows = [{'x': i, 'y': i * i} for i in range(50)]\n"
    "await chart({'title': 'Squares', 'data': {'values': rows}, 'mark': 'line', 'encoding': {\n"
    "    'x': {'field': 'x', 'type': 'quantitative'}, 'y': {'field': 'y', 'type': 'quantitative'}}})"
)


@pytest.fixture(scope="module")
def redis_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    with redis(tmp_path_factory.mktemp("redis")) as port:
        yield port


def store_settings(store: str, sample_db: Path, tmp_path: Path, redis_port: int, **sessions: object) -> Settings:
    if store == "redis":
        shared = {"store": f"redis://127.0.0.1:{redis_port}/0", "secret": f"charts-{tmp_path.name}-0123456789"}
        return make_settings(sample_db, sessions=shared | sessions)
    return make_settings(sample_db, sessions={"dir": tmp_path / "sessions", **sessions})


@pytest.mark.parametrize("store", ["file", "redis"])
async def test_a_chart_is_stored_with_the_session_and_read_back_by_the_next_server(
    store: str, sample_db: Path, tmp_path: Path, redis_port: int
) -> None:
    settings = store_settings(store, sample_db, tmp_path, redis_port)
    kb = await KnowledgeBase.open(settings)
    try:
        async with WorkerPool(settings.sandbox) as pool:
            async with SessionManager(kb, pool, settings) as manager:
                session = await manager.get(ALICE, document_filter=None, owner="alice")
                drawn = (await session.execute(DRAW)).charts
            async with SessionManager(kb, pool, settings) as manager:  # a restart: memory holds nothing
                again = await manager.get(ALICE, document_filter=None, owner="alice")
                kept = again.state.chart(1)
                more = await again.execute("await chart({'data': {'values': rows}, 'mark': 'point'})")
    finally:
        await kb.close()
    assert [c.index for c in drawn] == [1]
    assert kept is not None and kept.png == drawn[0].png and kept.svg == drawn[0].svg
    assert kept.spec == drawn[0].spec and kept.execution == 1 and kept.title == "Squares"
    assert [c.index for c in more.charts] == [2] and more.success  # variables and numbering came back too


POINTS = (
    "points = [{'x': i, 'y': (i * 7) % 13} for i in range(3000)]\n"
    "await chart({'data': {'values': points}, 'mark': 'point', 'encoding': {\n"
    "    'x': {'field': 'x', 'type': 'quantitative'}, 'y': {'field': 'y', 'type': 'quantitative'}}})\n"
    "points = None"
)


async def test_charts_count_toward_the_stored_size_of_sessions(sample_db: Path, tmp_path: Path) -> None:
    # 1 MB for every kept session together: one session's large chart fits, a second one's does not.
    settings = make_settings(
        sample_db, sessions={"dir": tmp_path / "sessions", "max_stored_mb": 1}, sandbox={"max_state_mb": 1}
    )
    kb = await KnowledgeBase.open(settings)
    try:
        async with WorkerPool(settings.sandbox) as pool, SessionManager(kb, pool, settings) as manager:
            alice = await manager.get(ALICE, document_filter=None, owner="alice")
            drawn = await alice.execute(POINTS)
            bob = await manager.get(SessionKey.principal("bob"), document_filter=None, owner="bob")
            assert (await bob.execute("x = 1")).success
            with pytest.raises(SessionLimitError, match=r"sessions.max_stored_mb"):
                await bob.execute(POINTS)
            bob = await manager.get(SessionKey.principal("bob"), document_filter=None, owner="bob")
            kept = await bob.execute("x + 1")
    finally:
        await kb.close()
    assert drawn.charts[0].kept_bytes > 500_000 and alice.state.chart(1) is not None
    assert kept.value == "2" and bob.state.charts == []  # the refused call's chart was not kept
