"""Hostile testing of the edges added by issues 8-12: each attack here once broke something.

Rendering an execution's value, host statistics, config files and kept sessions, tried
as an attacker (or a careless client) would. Each test asserts the precise contained
outcome; the comments say what happened before the fix.
"""

from __future__ import annotations

import re
import time
import tracemalloc
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from mcp_analysis.config import SandboxSettings, Settings
from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.errors import CitationError, SandboxError, SessionNotFoundError
from mcp_analysis.sandbox.bounds import HostBounds, HostLimitError
from mcp_analysis.sandbox.pool import WorkerPool
from mcp_analysis.sandbox.presentation import value_repr
from mcp_analysis.session.analysis import AnalysisSession
from mcp_analysis.session.keys import SessionKey
from mcp_analysis.session.manager import SessionManager
from tests.conftest import make_settings, run_cli
from tests.mcp_helpers import free_port, http_server
from tests.services import redis

pytestmark = pytest.mark.anyio

LIMIT = 50_000
MB = 1_000_000


def peak_bytes(fn: Callable[[], Any]) -> tuple[Any, int]:
    """fn()'s result and the most memory it held at once (Python allocations)."""
    tracemalloc.start()
    try:
        result = fn()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# ------------------------------------------------------------------ an execution's value

SHARED = "x" * MB  # one string, referenced many times: cheap to hold, huge to print


@pytest.mark.parametrize(
    "name, value",
    [
        ("list of one string many times", [SHARED] * 300),
        ("dict of one string many times", dict.fromkeys(range(300), SHARED)),
        ("tuple of lists", tuple([[SHARED] * 10] * 30)),
        ("set of large strings", {SHARED + str(i) for i in range(50)}),
        ("bytes in a list", [SHARED.encode()] * 300),
    ],
)
def test_an_execution_value_renders_within_its_limit(name: str, value: Any) -> None:
    # The sandbox holds these in ~1-50 MB; rendering them whole built a 300 MB string on the
    # server's event loop ([s] * 3000 took 12 s and 3 GB of the server's memory).
    text, peak = peak_bytes(lambda: value_repr(value, LIMIT))
    assert LIMIT <= len(text) <= LIMIT + 200, name
    assert text.endswith("characters: print or slice the part you need]"), text[-120:]
    assert peak < 2 * MB, f"{name}: rendering held {peak:,} bytes"


def test_small_values_render_as_python_does() -> None:
    values = [[1, "a", b"b", 2.5, None, True], (1,), (), {"k": [1, 2]}, {1, 2}, frozenset({3}), set()]
    for value in values:
        assert value_repr(value, LIMIT) == repr(value)
    assert value_repr(10**5000, LIMIT).startswith("<int of 5,001 digits")
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    assert "repr failed" in value_repr(deep, LIMIT)


FORGE = """
s = 'x' * 1_000_000
class P:
    pass
p = P()
p.many = [s] * 200
class _Record:
    pass
r = _Record()
r._kind = 'hit'
r.rank = 1
r.chunk_id = s
r.document_id = 'd'
r.document_title = s
r.headings = [s] * 200
r.page_numbers = list(range(100_000))
r.excerpt = s
r.content = s + s
"""


@pytest.mark.parametrize("expression", ["[s] * 200", "p", "r", "[r] * 100", "{'k': (r, p)}"])
async def test_sandbox_values_cannot_make_the_server_render_something_huge(kb: KnowledgeBase, expression: str) -> None:
    # A class instance or a forged search hit (`_Record`, the prelude's class) whose attributes
    # share one big string: the server rendered each reference in full, on its event loop.
    async with AnalysisSession(kb) as session:
        assert (await session.execute(FORGE)).success
        tracemalloc.start()
        try:
            result = await session.execute(expression)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert result.success, result.error
        assert result.value is not None and len(result.value) <= kb.settings.sandbox.max_output_chars + 200
        assert "characters: print or slice the part you need]" in result.value
        assert peak < 30 * MB, f"rendering {expression} held {peak:,} bytes on the server"
        if expression == "r":
            assert result.value.startswith("Hit(rank=1, chunk_id='xxx")
        still = await session.execute("len(s)")
        assert still.value == "1000000"


# ------------------------------------------------------------------ host statistics


async def test_statistics_refuse_numbers_beyond_a_float_range(sample_db: Path) -> None:
    # One 8.5-million-digit int made statistics.pvariance hold the GIL in big-int arithmetic:
    # the server's event loop stopped for ~15 s, and the computation went on after the call had
    # timed out (another 15 s). Counting it as ~27,000 values did not bound its cost.
    kb = await KnowledgeBase.open(make_settings(sample_db, sandbox={"code_timeout": 5.0}))
    async with AnalysisSession(kb) as session:
        assert (await session.execute("import statistics\nb = 7 ** 10_000_000\nkeep = 1")).success
        for call in ("statistics.pvariance([b, 1, 2])", "statistics.mean([1.5, {'x': [2 ** 1100]}])"):
            result = await session.execute(call)
            assert not result.success and not result.state_restored, result
            assert "ValueError: statistics." in (result.error or ""), result.error
            assert "at most 309 digits" in (result.error or "") and "float" in (result.error or ""), result.error
        fine = await session.execute(
            "statistics.median_high([2**1020, 2**1020, 1]) == 2**1020, statistics.mean([10**300, 0])"
        )
        assert fine.value == "(True, 5" + "0" * 299 + ")", fine.error
        assert (await session.execute("keep")).value == "1"
    await kb.close()


# ------------------------------------------------------------------ kept sessions


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
    # The operator narrows alice's token filter and restarts. Her kept session (made under the old
    # filter) must not come back, but every later call of hers failed with "was changed by another
    # call ... Retry" — forever, since each attempt refreshed the old session's TTL.
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
    # Bob, given alice's session id (it is in her resource URIs), passed it as `session`: the id
    # looked like one this server issued and was never kept under that key, so bob got a fresh
    # session under alice's id, and alice's own id then answered her "Unknown or expired".
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


@pytest.fixture(scope="module")
def redis_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    with redis(tmp_path_factory.mktemp("redis")) as port:
        yield port


def redis_settings(db: Path, port: int, secret: str, **sessions: Any) -> Settings:
    return make_settings(db, sessions={"store": f"redis://127.0.0.1:{port}/0", "secret": secret, **sessions})


async def test_deployments_sharing_a_redis_never_meet(sample_db: Path, redis_port: int, tmp_path: Path) -> None:
    # Two deployments whose knowledge bases have the same path (each in its own container) and
    # one Redis: keyed by the path alone, their sessions shared one namespace. The other's
    # record of `principal:alice` failed the signature and blocked alice's saves; the other's
    # sessions filled this one's bounds.
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
    # A record that fails its signature is never loaded; for a principal's own key it used to
    # refuse every later save ("changed by another call ... Retry") until it expired, and each
    # attempt refreshed its TTL.
    import redis.asyncio as aioredis

    db = tmp_path / "tampered.lancedb"
    db.symlink_to(sample_db, target_is_directory=True)
    settings = redis_settings(db, redis_port, "tamper-0123456789abcdef")
    kb = await KnowledgeBase.open(settings)
    async with WorkerPool(settings.sandbox) as pool:
        async with SessionManager(kb, pool, settings) as manager:
            session = await manager.get(SessionKey.principal("grace"), document_filter=None, owner="grace")
            assert (await session.execute("secret_value = 7")).success
        client = aioredis.Redis(port=redis_port)
        keys = [k async for k in client.scan_iter(match="*:s:principal:grace")]
        assert len(keys) == 1
        record = await client.hget(keys[0], "rec")
        await client.hset(keys[0], "rec", record.replace(b'"grace"', b'"mallory"', 1))
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


# ------------------------------------------------------------------ config files


def alias_bomb(levels: int = 9) -> list[str]:
    """YAML anchors nested `levels` deep, each referring 9 times to the one before: 9**levels leaves."""
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * 9)}]" for n in range(1, levels)]
    return lines


@pytest.mark.parametrize(
    "name, text, flag",
    [
        ("haiku.rag.yaml", "\n".join(alias_bomb()) + "\nanalysis:\n  model: *l8\n", "--config"),
        ("mcp-analysis.yaml", "storage_options:\n" + "\n".join("  " + line for line in alias_bomb()), "--config"),
        ("tokens.yaml", "\n".join(alias_bomb()) + "\ntokens: [{name: *l8, token: abcdefghijklmnopq}]", "--tokens-file"),
    ],
)
def test_a_yaml_alias_bomb_is_refused(sample_db: Path, tmp_path: Path, name: str, text: str, flag: str) -> None:
    # A few hundred bytes of anchors expand to 387 million values: loading the config (expanding
    # ${VAR}s, validating) or the tokens file never finished and grew without bound.
    path = tmp_path / name
    path.write_text(text)
    args = [flag, str(path), "info"] if flag == "--config" else ["serve", "--http", "--port", "1", flag, str(path)]
    run = run_cli("--db", str(sample_db), *args, env={"XDG_DATA_HOME": str(tmp_path)}, timeout=60)
    assert run.returncode == 1, run.stderr[-500:]
    assert f"{path} expands to more than 100,000 values" in run.stderr and "anchors" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr


# ------------------------------------------------------------------ health and metrics


def test_health_and_metrics_reveal_no_locations_or_reasons_without_a_token(sample_db: Path, tmp_path: Path) -> None:
    # /healthz is unauthenticated (balancers and readiness probes call it without a token), and
    # it answered anyone with the knowledge base's location and each failing part's raw error
    # text (hosts, ports, object-store error bodies). With tokens configured, details now need one.
    token = "hos-health-token-0123456789"
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(f"tokens:\n  - name: ops\n    token: {token}\n    filter: \"uri LIKE '%secret-project%'\"\n")
    dead_redis = free_port()
    env = {
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "MCP_ANALYSIS_SESSIONS__STORE": f"redis://:hunter2-password@127.0.0.1:{dead_redis}/0",
        "MCP_ANALYSIS_SESSIONS__SECRET": "health-secret-0123456789abcdef",
    }
    with http_server(sample_db, "--tokens-file", str(tokens), env=env, log_dir=tmp_path) as server:
        base = f"http://127.0.0.1:{server.port}"
        deadline = time.monotonic() + 60
        while (anonymous := httpx2.get(f"{base}/healthz", timeout=10)).json()["checks"]["workers"] != "ok":
            assert time.monotonic() < deadline, anonymous.text
            time.sleep(0.25)
        authorized = httpx2.get(f"{base}/healthz", headers={"Authorization": f"Bearer {token}"}, timeout=10)

        async def made_up_tools() -> None:  # label values are never the client's words
            async with server.client(token) as client:
                for n in range(30):
                    assert (await client.call_tool(f"evil-{n}-{'x' * 200}", {})).is_error

        anyio.run(made_up_tools)
        metrics = httpx2.get(f"{base}/metrics", timeout=10)
    assert anonymous.status_code == authorized.status_code == 503
    body = anonymous.json()
    assert body["ready"] is False and body["checks"] == {
        "knowledge_base": "ok",
        "session_store": "failing",
        "workers": "ok",
    }
    public = anonymous.text + metrics.text
    for secret in (str(sample_db), str(dead_redis), "hunter2", token, "secret-project"):
        assert secret not in public, secret
    detailed = authorized.json()
    assert detailed["db"] == str(sample_db) and str(dead_redis) in detailed["checks"]["session_store"]
    assert "hunter2" not in authorized.text
    assert metrics.status_code == 200 and "mcp_analysis_ready 0.0" in metrics.text
    labels = set(re.findall(r'tool="([^"]*)"', metrics.text))
    assert labels == {"unknown"}, labels
    assert 'mcp_analysis_tool_calls_total{tool="unknown"} 30.0' in metrics.text


async def test_another_principal_cannot_take_a_sessions_lock(sample_db: Path, redis_port: int, tmp_path: Path) -> None:
    # Bob, given alice's session id, could make each of his calls take alice's cross-replica lock
    # before being refused: enough parallel calls kept alice waiting, then "busy".
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


def test_host_call_bounds_are_exact() -> None:
    # docs/sandbox.md: "at most sandbox.max_memory_mb × 4,096 values per call". The argument wrappers and the
    # outer list were counted too: a list of exactly that many numbers was refused (4 short), and
    # quantiles(n=max+1) passed its pre-check, computed, then failed the result check.
    bounds = HostBounds.of(SandboxSettings(max_memory_mb=16))
    most = bounds.max_values
    assert most == 16 * 4096
    bounds.check_arguments("statistics.mean", ([0] * most,), {})
    bounds.check_arguments("statistics.covariance", ([0] * (most // 2), [1] * (most // 2)), {})
    bounds.check_arguments("statistics.mode", ([[]] * most,), {})  # nested containers count
    bounds.check_result("statistics.quantiles", [0.0] * most)
    bounds.check_count("statistics.quantiles", most)
    for over in (([0] * (most + 1),), ([[]] * (most + 1),), ([0] * (most // 2), [1] * (most // 2 + 1))):
        with pytest.raises(HostLimitError, match=f"more than {most:,} values"):
            bounds.check_arguments("statistics.mean", over, {})
    with pytest.raises(HostLimitError):
        bounds.check_result("statistics.quantiles", [0.0] * (most + 1))
    with pytest.raises(HostLimitError):
        bounds.check_count("statistics.quantiles", most + 1)


async def test_a_kept_session_does_not_grow_without_bound(
    manager_parts: tuple[KnowledgeBase, WorkerPool, Settings], tmp_path: Path
) -> None:
    # Code of any size was run and kept: each 2 MB program added 4 MB to the kept session (its
    # text in the state, its source in the interpreter dump), written through on every call; 200
    # such calls made one session 800 MB on disk or in Redis (a shared Redis evicts others).
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


# ------------------------------------------------------------------ contained (regressions)


async def test_redefining_the_prelude_harms_only_its_own_session(kb: KnowledgeBase) -> None:
    """Sandbox code may rebind search, _mcp_search and _Record: its own session breaks until
    new_analysis; other sessions, and hibernation, are unaffected."""
    async with AnalysisSession(kb) as mine, AnalysisSession(kb) as other:
        tampered = await mine.execute(
            "class _Record:\n    def __init__(self, *a):\n        self.evil = True\n"
            "async def _mcp_search(q, l):\n    return [{'x': 1}]\nkept = 5\n(await search('revenue'))[0].evil"
        )
        assert tampered.value == "True"
        assert mine.interpreter is not None
        await mine.interpreter.hibernate()
        assert (await mine.execute("kept, (await search('revenue'))[0].evil")).value == "(5, True)"
        hits = await other.execute("h = await search('revenue', limit=2)\n(len(h), type(h[0]).__name__, h[0].rank)")
        assert hits.value == "(2, '_Record', 1)", hits.error
        await mine.new_analysis()
        restored = await mine.execute("r = (await search('revenue', limit=1))[0]\n(r.rank, repr(r)[:4])")
        assert restored.value == "(1, 'Hit(')", restored.error


@pytest.mark.parametrize(
    "text",
    [
        "analysis:\n  model: {name: '${HOS_TEST_SECRET}'}\n",
        "embeddings:\n  model: {provider: '', name: '${HOS_TEST_SECRET}'}\n",
        "analysis: '${HOS_TEST_SECRET}'\nlancedb: {uri: /tmp/x}\n",
    ],
)
def test_config_errors_never_show_expanded_environment_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    # ${VAR} references are expanded before the file is checked, and errors printed the expanded
    # value: a haiku.rag.yaml mistake put the variable's secret on stderr (and into logs).
    from mcp_analysis.config import load_settings
    from mcp_analysis.errors import ConfigError

    monkeypatch.setenv("HOS_TEST_SECRET", "sk-do-not-print-0123456789")
    path = tmp_path / "haiku.rag.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_settings(config=path)
    assert "sk-do-not-print" not in str(caught.value), caught.value
    assert str(path) in str(caught.value)


GONE_X = "try:\n    x\n    gone = False\nexcept NameError:\n    gone = True\n(keep, gone)"


async def test_a_state_too_large_to_keep_is_reported(sample_db: Path) -> None:
    # A call that left 200 MB in variables reported success and state_restored=True, and nothing
    # else: the state could not be dumped (the copy exceeded the worker's memory), so the variables
    # were silently gone on the next call. And a dump that does fit was held in the server's memory
    # and written to the session store on every call, whatever its size.
    kb = await KnowledgeBase.open(make_settings(sample_db, sandbox={"max_state_mb": 16}))
    async with AnalysisSession(kb) as session:
        assert (await session.execute("keep = 1")).success
        for size in (40_000_000, 200_000_000):
            result = await session.execute(f"x = 'a' * {size}\nlen(x)")
            assert result.success and result.state_restored and result.value == str(size), result
            assert "this call's variables were not kept" in result.stderr, result
            assert "sandbox.max_state_mb" in result.stderr or "MemoryError" in result.stderr, result.stderr
            after = await session.execute(GONE_X)
            assert after.value == "(1, True)", after
        assert len(session.interpreter_state or b"") < 16 * MB
    await kb.close()


async def test_a_malformed_handle_never_reaches_the_session_store(
    sample_db: Path, redis_port: int, tmp_path: Path
) -> None:
    # A 1 MB `session` argument became a 1 MB Redis key: a lock taken and released, a lookup,
    # on every call that sent it. Handles are short; anything else is unknown without asking Redis.
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


async def test_keyword_mode_keeps_the_filter_on_every_path(sample_db: Path) -> None:
    """search.mode: keyword (full-text only): the filter is a prefilter for the tool, the sandbox's
    search() and cite, so hidden documents neither appear nor take the slots of visible ones."""
    kb = await KnowledgeBase.open(make_settings(sample_db, search={"mode": "keyword"}))
    everything = await kb.corpus().search("security", 10)
    hidden = [hit for hit in everything if "advisory" not in hit.document_uri]
    assert hidden and "advisory" not in everything[0].document_uri  # the best match is hidden below
    async with AnalysisSession(kb, filter="uri LIKE '%advisory%'") as session:
        top = await session.search("security", 1)
        assert len(top) == 1 and "advisory" in top[0].document_uri
        inside = await session.execute(
            "hits = await search('security revenue quarterly', limit=20)\n"
            "(len(hits) > 0, all('advisory' in h.document_uri for h in hits), len(await list_documents(0, 100)))"
        )
        assert inside.value == "(True, True, 4)", inside.error
        with pytest.raises(CitationError, match="could be resolved"):
            await session.cite([hidden[0].chunk_id])
    await kb.close()
