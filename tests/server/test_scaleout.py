"""Scale-out: replicas over a knowledge base on S3 (moto) with sessions in Redis (redis-server).

One moto S3 server, one redis-server and two `serve --http` replicas for the whole module,
all real processes on loopback; S3 and Redis are reached through TCP gates that the outage
test cuts. Replicas authenticate with bearer tokens (the principal is the session key).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp.client.subscriptions import ResourcesListChanged
from mcp.shared.exceptions import MCPError

from mcp_analysis.config import Settings
from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.errors import SessionBusyError, SessionLimitError
from mcp_analysis.sandbox.pool import WorkerPool
from mcp_analysis.session.keys import SessionKey
from mcp_analysis.session.manager import SessionManager
from mcp_analysis.session.stores.redis import RedisSessionStore
from tests.conftest import REPO, make_settings, run_cli, run_cli_at_once
from tests.docs_factory import write_markdown
from tests.mcp_helpers import HttpServer, http_server, metric_samples, text
from tests.services import S3, TcpGate, moto_s3, redis
from tests.session.test_memory import check_stored_bytes_bound

pytestmark = pytest.mark.anyio

SECRET = "scale-out-test-secret-0123456789abcdef"
TOKENS = {"alice": "alice-token-0123456789", "bob": "bob-token-0123456789", "carol": "carol-token-0123456789"}
LOCK_TIMEOUT = 4.0
LOCK_LEASE = 3.0  # sessions.lock_lease_seconds


@dataclass
class Cluster:
    s3: S3
    db: str
    s3_gate: TcpGate
    redis_port: int
    redis_gate: TcpGate
    logs: Path
    tokens_file: Path
    stack: contextlib.ExitStack
    replicas: list[HttpServer] = field(default_factory=list)

    @property
    def env(self) -> dict[str, str]:
        return {
            **self.s3.env(f"http://127.0.0.1:{self.s3_gate.port}"),
            "MCP_ANALYSIS_SESSIONS__STORE": f"redis://127.0.0.1:{self.redis_gate.port}/0",
            "MCP_ANALYSIS_SESSIONS__SECRET": SECRET,
            "MCP_ANALYSIS_SESSIONS__LOCK_TIMEOUT": str(LOCK_TIMEOUT),
            # A killed replica's sessions are free again after 3 s, not 10 (renewed every second meanwhile).
            "MCP_ANALYSIS_SESSIONS__LOCK_LEASE_SECONDS": str(LOCK_LEASE),
            "MCP_ANALYSIS_SERVER__WATCH_INTERVAL": "0.5",
            "MCP_ANALYSIS_SANDBOX__WORKERS": "1",
            # An outage fails a call at once, not after 3 retries (~5 s a call): the store is on loopback.
            "MCP_ANALYSIS_STORAGE_OPTIONS": '{"client_max_retries": "0"}',
        }

    def start_replica(self, index: int | None = None) -> HttpServer:
        number = len(self.replicas) if index is None else index
        env = {**self.env, "XDG_DATA_HOME": str(self.logs / f"replica-{number}-{time.monotonic_ns()}")}
        server = self.stack.enter_context(
            http_server(self.db, "--tokens-file", str(self.tokens_file), log_dir=self.logs, env=env)
        )
        wait_ready(server)
        if index is None:
            self.replicas.append(server)
        else:
            self.replicas[index] = server
        return server


def healthz(server: HttpServer) -> httpx2.Response:
    # With a token: the reasons of failing checks are shown only to authenticated requests.
    headers = {"Authorization": f"Bearer {TOKENS['alice']}"}
    return httpx2.get(f"http://127.0.0.1:{server.port}/healthz", headers=headers, timeout=10)


def wait_ready(server: HttpServer, ready: bool = True, timeout: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        response = healthz(server)
        if (response.status_code == 200) == ready:
            return dict(response.json())
        if time.monotonic() > deadline:
            raise AssertionError(f"/healthz did not become {'ready' if ready else 'unready'}: {response.text}")
        time.sleep(0.25)


@pytest.fixture(scope="module")
def cluster(sample_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    logs = tmp_path_factory.mktemp("scaleout")
    tokens_file = logs / "tokens.yaml"
    tokens_file.write_text("tokens:\n" + "".join(f"  - name: {n}\n    token: {t}\n" for n, t in TOKENS.items()))
    with contextlib.ExitStack() as stack:
        s3 = stack.enter_context(moto_s3(logs))
        redis_port = stack.enter_context(redis(logs))
        s3_gate = TcpGate(s3.port)
        stack.callback(s3_gate.close)
        redis_gate = TcpGate(redis_port)
        stack.callback(redis_gate.close)
        db = s3.upload_dir(sample_db, "kb")
        cluster = Cluster(s3, db, s3_gate, redis_port, redis_gate, logs, tokens_file, stack)
        cluster.start_replica()
        cluster.start_replica()
        yield cluster


# ------------------------------------------------------------- continuity


async def test_a_session_continues_on_another_replica(cluster: Cluster) -> None:
    a, b = cluster.replicas
    token = TOKENS["alice"]
    async with a.client(token) as on_a, b.client(token) as on_b:
        first = await on_a.call_tool("execute_code", {"code": "x = 41"})
        assert first.structured_content["success"], text(first)
        handle = first.structured_content["session"]
        found = await on_a.call_tool("search", {"query": "phishing campaign", "limit": 2})
        chunk = found.structured_content["results"][0]["chunk_id"]
        assert not (await on_a.call_tool("cite", {"chunk_ids": [chunk]})).is_error

        # Replica B, by the bearer principal: the same session, its variables, searches, citations.
        on_b_result = await on_b.call_tool("execute_code", {"code": "x + 1"})
        assert on_b_result.structured_content["value"] == "42"
        assert on_b_result.structured_content["session"] == handle
        state = (await on_b.call_tool("analysis_state", {})).structured_content
        assert "phishing campaign" in state["searches"]
        assert [c["chunk_id"] for c in state["citations"]] == [chunk]

        # A must not serve its in-memory copy now that B changed the session.
        await on_b.call_tool("execute_code", {"code": "x = 100"})
        assert (await on_a.call_tool("execute_code", {"code": "x"})).structured_content["value"] == "100"
        # And by explicit `session=` on B.
        by_handle = await on_b.call_tool("execute_code", {"code": "x + 1", "session": handle})
        assert by_handle.structured_content["value"] == "101"


async def test_two_replicas_never_run_one_session_at_once(cluster: Cluster) -> None:
    a, b = cluster.replicas
    token = TOKENS["bob"]
    async with a.client(token) as on_a, b.client(token) as on_b:
        assert (await on_a.call_tool("execute_code", {"code": "n = 0"})).structured_content["success"]
        results: dict[str, Any] = {}

        async def on(name: str, client: Any, code: str, delay: float) -> None:
            await anyio.sleep(delay)
            results[name] = await client.call_tool("execute_code", {"code": code})

        # B's call arrives while A runs the session: it waits for A, then sees A's update.
        async with anyio.create_task_group() as tg:
            tg.start_soon(on, "a", on_a, "import time\ntime.sleep(2)\nn = n + 1\nn", 0.0)
            tg.start_soon(on, "b", on_b, "n = n + 1\nn", 0.7)
        assert results["a"].structured_content["value"] == "1"
        assert results["b"].structured_content["value"] == "2"  # no lost update

        # Held past sessions.lock_timeout: a clear, retryable error, and nothing changed by it.
        async with anyio.create_task_group() as tg:
            tg.start_soon(on, "a", on_a, "import time\ntime.sleep(7)\nn = n + 10\nn", 0.0)
            tg.start_soon(on, "b", on_b, "n = n + 1000\nn", 0.7)
        assert results["a"].structured_content["value"] == "12"
        assert results["b"].is_error
        message = text(results["b"])
        assert "is busy" in message and "Retry" in message and "sessions.lock_timeout" in message
        assert (await on_b.call_tool("execute_code", {"code": "n"})).structured_content["value"] == "12"


async def test_a_stale_copy_cannot_overwrite_newer_state(cluster: Cluster, sample_settings: Settings) -> None:
    """Two replicas' managers in one process, sharing Redis, no request locks: the version check."""
    settings = _redis_settings(sample_settings, cluster.redis_port)
    kb = await KnowledgeBase.open(settings)
    async with (
        WorkerPool(settings.sandbox) as pool,
        SessionManager(kb, pool, settings) as one,
        SessionManager(kb, pool, settings) as two,
    ):
        mine = await one.create_handle(document_filter=None, owner=None)
        await mine.execute("v = 'first'")
        copy = await two.resolve(mine.id, owner=None, document_filter=None)
        assert (await copy.execute("v")).value == "'first'"
        await copy.execute("v = 'second'")  # two saves version 2 -> 3
        stale = one.by_id(mine.id, None)
        assert stale is mine and mine.persistence.version < copy.persistence.version
        with pytest.raises(SessionBusyError, match="changed by another call"):
            await mine.execute("v = 'forked'")
        again = await one.resolve(mine.id, owner=None, document_filter=None)  # reloaded, not forked
        assert (await again.execute("v")).value == "'second'"
    await kb.close()


async def test_redis_bounds_and_expired_handles(cluster: Cluster, sample_settings: Settings) -> None:
    settings = _redis_settings(sample_settings, cluster.redis_port, max_stored=10_000, max_per_principal=2)
    kb = await KnowledgeBase.open(settings)
    async with WorkerPool(settings.sandbox) as pool, SessionManager(kb, pool, settings) as manager:
        for _ in range(2):
            await (await manager.create_handle(document_filter=None, owner="dave")).execute("a = 1")
        third = await manager.create_handle(document_filter=None, owner="dave")
        with pytest.raises(SessionLimitError, match=r"principal 'dave' \(limit 2"):
            await third.execute("a = 1")
        kept = await manager.create_handle(document_filter=None, owner="erin")
        await kept.execute("b = 2")
        await manager.drop(SessionKey.handle(kept.id))
        with pytest.raises(Exception, match="Unknown or expired"):
            await manager.resolve(kept.id, owner="erin", document_filter=None)
    await kb.close()


async def test_redis_keeps_at_most_max_stored_mb(cluster: Cluster, sample_settings: Settings) -> None:
    settings = _redis_settings(sample_settings, cluster.redis_port, max_stored_mb=20)
    await check_stored_bytes_bound(
        settings.model_copy(update={"sandbox": settings.sandbox.model_copy(update={"max_state_mb": 10})})
    )


def _redis_settings(base: Settings, port: int, **sessions: Any) -> Settings:
    # Its own namespace (another db string): the replicas' sessions and bounds are not touched.
    return make_settings(
        base.db,
        sessions={"store": f"redis://127.0.0.1:{port}/0", "secret": SECRET, **sessions},
    )


def test_a_shared_store_without_a_secret_is_refused(cluster: Cluster, tmp_path: Path) -> None:
    env = {**cluster.env, "XDG_DATA_HOME": str(tmp_path)}
    run = run_cli(
        "--db",
        cluster.db,
        "serve",
        "--http",
        "--port",
        "1",
        env=env,
        unset=["MCP_ANALYSIS_SESSIONS__SECRET"],
        timeout=60,
    )
    assert run.returncode == 1
    assert "sessions.secret is not set" in run.stderr and "MCP_ANALYSIS_SESSIONS__SECRET" in run.stderr


async def test_redis_sessions_are_signed(cluster: Cluster, sample_settings: Settings) -> None:
    """A stored dump altered in Redis (or signed with another key) is never loaded into monty."""
    import redis.asyncio as aioredis

    settings = _redis_settings(sample_settings, cluster.redis_port)
    kb = await KnowledgeBase.open(settings)
    async with WorkerPool(settings.sandbox) as pool:
        async with SessionManager(kb, pool, settings) as manager:
            session = await manager.create_handle(document_filter=None, owner="frank")
            await session.execute("secret_value = 7")
            assert isinstance(manager.store, RedisSessionStore)
            key = manager.store.redis_key(SessionKey.handle(session.id))
        client = aioredis.Redis(port=cluster.redis_port)
        chunks = key.replace(":s:", ":c:")  # the dump's chunks beside the record
        field = (await client.hkeys(chunks))[0]
        piece = await client.hget(chunks, field)
        assert piece
        await client.hset(chunks, field, piece[:-4] + b"XXXX")
        await client.aclose()
        async with SessionManager(kb, pool, settings) as manager:
            with pytest.raises(Exception, match="Unknown or expired"):
                await manager.resolve(session.id, owner="frank", document_filter=None)
    await kb.close()


# ------------------------------------------------------------- documents


def test_every_command_takes_an_s3_uri(cluster: Cluster, tmp_path: Path) -> None:
    """`--db s3://...` (and MCP_ANALYSIS_DB) survive as URIs: list, search, info, exec (add and serve
    are the other tests here)."""
    env = {**cluster.env, "XDG_DATA_HOME": str(tmp_path)}

    def cli(*args: str, db_env: bool = False) -> subprocess.CompletedProcess[str]:
        db = [] if db_env else ["--db", cluster.db]
        run = run_cli(*db, *args, env={**env, "MCP_ANALYSIS_DB": cluster.db} if db_env else env, timeout=120)
        assert run.returncode == 0, run.stderr
        return run

    listed = json.loads(cli("list", "--json").stdout)
    assert len(listed) >= 12
    hits = json.loads(cli("search", "phishing campaign", "--limit", "2", "--json", db_env=True).stdout)
    assert hits and "chunk_id" in hits[0]
    info = json.loads(cli("info", "--json").stdout)
    assert info["db"] == cluster.db and info["documents"] == len(listed)
    ran = cli("exec", "import os\nlen(os.listdir('/documents'))")
    assert ran.stdout.strip() == str(len(listed))
    # The endpoint from the storage_options section instead of the AWS_* variables.
    endpoint = env.pop("AWS_ENDPOINT_URL")
    env.pop("AWS_ALLOW_HTTP")
    env["MCP_ANALYSIS_STORAGE_OPTIONS__AWS_ENDPOINT"] = endpoint
    env["MCP_ANALYSIS_STORAGE_OPTIONS__ALLOW_HTTP"] = "true"
    assert len(json.loads(cli("list", "--json").stdout)) == len(listed)


def test_a_missing_bucket_is_named_with_what_to_do(cluster: Cluster, tmp_path: Path) -> None:
    """The store's NoSuchBucket leads the error, with what to do: never a cut "cannot be read right now ... Retry"."""
    (tmp_path / "note.md").write_text("# Note\n\nA first document.\n")
    env = {**cluster.env, "XDG_DATA_HOME": str(tmp_path)}
    commands = (["add", str(tmp_path / "note.md")], ["list"])  # at once: each waits out the store's own retries first
    runs = run_cli_at_once({n: (["--db", "s3://no-such-bucket/kb", *args], env) for n, args in enumerate(commands)})
    for run in runs.values():
        assert run.returncode == 1 and len(run.stderr.strip().splitlines()) == 1, run.stderr
        assert "the object store has no bucket 'no-such-bucket' (NoSuchBucket" in run.stderr
        assert "Create the bucket first" in run.stderr and "Retry" not in run.stderr


async def test_an_added_document_reaches_every_replica(cluster: Cluster, tmp_path: Path) -> None:
    a, b = cluster.replicas
    token = TOKENS["carol"]
    async with a.client(token) as on_a, b.client(token) as on_b:
        before = (await on_a.call_tool("list_documents", {})).structured_content["total"]
        async with (
            on_a.listen(resources_list_changed=True) as heard_a,
            on_b.listen(resources_list_changed=True) as heard_b,
        ):
            new_doc = write_markdown(tmp_path / "harbour-log.md")
            added = await anyio.run_process(  # another process (machine) adds a document on S3
                [sys.executable, "-m", "mcp_analysis", "--db", cluster.db, "add", str(new_doc)],
                cwd=REPO,
                env={**os.environ, **cluster.env, "XDG_DATA_HOME": str(tmp_path / "cli")},
                check=False,
            )
            assert added.returncode == 0, added.stderr.decode()
            committed = time.monotonic()
            waits = []
            for subscription in (heard_a, heard_b):
                with anyio.fail_after(60):
                    async for event in subscription:
                        assert isinstance(event, ResourcesListChanged)
                        waits.append(time.monotonic() - committed)
                        break
        for client in (on_a, on_b):
            listed = (await client.call_tool("list_documents", {})).structured_content
            assert listed["total"] == before + 1
            assert any(d["title"] == "Harbour Log" for d in listed["documents"])
    print(f"list_changed after the add: {', '.join(f'{w:.2f} s' for w in waits)}")


async def test_ingest_leftovers_on_object_storage_are_removed_only_when_settled(
    cluster: Cluster, sample_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Several machines may ingest at once on S3: a young orphan may be another ingest's batch."""
    import uuid
    from datetime import timedelta

    import pyarrow as pa

    from mcp_analysis.store import database, schema, writes

    for key, value in cluster.s3.env().items():
        monkeypatch.setenv(key, value)
    store = await database.Store.open(cluster.s3.upload_dir(sample_db, "orphans"))
    orphan = f"orphan-{uuid.uuid4()}"
    row = {"id": orphan, "content": "half-written", "docling_document": b""}
    await store.tables[schema.DOCUMENTS].add(pa.Table.from_pylist([row], schema=schema.DOCUMENTS_SCHEMA))
    assert orphan in await store.orphan_ids()
    assert await store.remove_orphans() == 0  # too young: maybe another machine's uncommitted batch
    assert orphan in await store.orphan_ids(settled=timedelta(0))
    monkeypatch.setattr(writes, "ORPHAN_GRACE", timedelta(0))  # as if ORPHAN_GRACE had passed
    assert await store.remove_orphans() == 1
    assert orphan not in await store.orphan_ids()
    store.close()


# --------------------------------------------------------------- failures


async def test_a_killed_replica_loses_only_the_call_it_was_running(cluster: Cluster) -> None:
    a, b = cluster.replicas
    token = TOKENS["carol"]
    async with a.client(token) as on_a:
        assert (await on_a.call_tool("execute_code", {"code": "k = 1"})).structured_content["success"]

    async def doomed() -> None:
        with contextlib.suppress(Exception):  # the connection drops when A dies
            async with a.client(token) as on_a:
                await on_a.call_tool("execute_code", {"code": "import time\nk = 99\ntime.sleep(30)"})

    async with anyio.create_task_group() as tg:
        tg.start_soon(doomed)
        await anyio.sleep(1.5)
        os.kill(a.process.pid, signal.SIGKILL)  # mid-call
        a.process.wait(timeout=10)
    async with b.client(token) as on_b:
        # The client continues on B from the last good state, once A's lock lease lapses.
        deadline = time.monotonic() + 60
        while True:
            result = await on_b.call_tool("execute_code", {"code": "k"})
            if not result.is_error or time.monotonic() > deadline:
                break
            assert "is busy" in text(result)
            await anyio.sleep(0.5)
        assert result.structured_content["value"] == "1", text(result)
    cluster.start_replica(0)  # later tests get their two replicas back


async def test_outages_are_reported_and_recovered_without_restart(cluster: Cluster) -> None:
    a, b = cluster.replicas
    token = TOKENS["alice"]
    async with a.client(token) as on_a:
        assert (await on_a.call_tool("execute_code", {"code": "survivor = 'yes'"})).structured_content["success"]
        document_id = (await on_a.call_tool("list_documents", {"limit": 1})).structured_content["documents"][0]["id"]

        # Redis down: calls that need sessions fail clearly; both replicas report unready.
        cluster.redis_gate.cut()
        failed = await on_a.call_tool("execute_code", {"code": "survivor"})
        assert failed.is_error and "session store" in text(failed) and "cannot be reached" in text(failed)
        for server in (a, b):
            assert wait_ready(server, ready=False, timeout=30)["checks"]["session_store"] != "ok"
        cluster.redis_gate.restore()
        for server in (a, b):
            wait_ready(server, timeout=30)
        back = await on_a.call_tool("execute_code", {"code": "survivor"})
        assert back.structured_content["value"] == "'yes'", text(back)

        # Object storage down: searches fail clearly; readiness names the knowledge base. A replica
        # started meanwhile keeps trying to open it.
        cluster.s3_gate.cut()
        for server in (a, b):
            assert wait_ready(server, ready=False, timeout=60)["checks"]["knowledge_base"] != "ok"
        env = {**cluster.env, "XDG_DATA_HOME": str(cluster.logs / "late-replica")}
        with http_server(cluster.db, "--tokens-file", str(cluster.tokens_file), log_dir=cluster.logs, env=env) as late:
            # Every way in says why (not a bare "Error executing tool" or "Internal server error"). The
            # calls run at once: each fails only after the store's own retries (~2 s a read here).
            said: dict[str, Any] = {}

            async def answer(name: str, call: Awaitable[Any]) -> None:
                try:
                    said[name] = await call
                except MCPError as exc:
                    said[name] = exc

            async with anyio.create_task_group() as tg:
                tg.start_soon(answer, "search", on_a.call_tool("search", {"query": "revenue"}))
                tg.start_soon(answer, "list", on_a.call_tool("list_documents", {}))
                tg.start_soon(answer, "resource", on_a.read_resource(f"documents:///{document_id}/metadata.json"))
                tg.start_soon(answer, "resources", on_a.list_resources())
            down, listed = said["search"], said["list"]
            assert not isinstance(down, MCPError) and down.is_error and "cannot be read right now" in text(down)
            assert not isinstance(listed, MCPError) and listed.is_error, listed
            assert "cannot be read right now" in text(listed), text(listed)
            for name in ("resource", "resources"):
                assert isinstance(said[name], MCPError) and "cannot be read right now" in str(said[name]), said[name]
            deadline = time.monotonic() + 90
            while "cannot be read right now" not in (check := healthz(late).json()["checks"]["knowledge_base"]):
                assert check == "opening" and time.monotonic() < deadline, check
                await anyio.sleep(0.25)
            cluster.s3_gate.restore()
            for server in (a, b, late):
                wait_ready(server, timeout=90)
            async with late.client(token) as on_late:
                again = await on_late.call_tool("execute_code", {"code": "survivor"})
                assert again.structured_content["value"] == "'yes'", text(again)
        up = await on_a.call_tool("search", {"query": "revenue", "limit": 1})
        assert not up.is_error and up.structured_content["results"]


async def test_metrics_count_tool_calls_and_sessions(cluster: Cluster) -> None:
    a = cluster.replicas[0]
    async with a.client(TOKENS["bob"]) as client:
        await client.call_tool("list_documents", {})
        await client.call_tool("execute_code", {"code": "1/0"})  # an error in the code is not a tool error
        await client.call_tool("search", {"query": ""})  # a tool error
    body = httpx2.get(f"http://127.0.0.1:{a.port}/metrics", timeout=10).text
    metrics = metric_samples(body)
    assert metrics['mcp_analysis_tool_calls_total{tool="list_documents"}'] >= 1
    assert metrics['mcp_analysis_tool_errors_total{tool="search"}'] >= 1
    assert metrics['mcp_analysis_tool_duration_seconds_count{tool="execute_code"}'] >= 1
    assert metrics["mcp_analysis_ready"] == 1.0
    assert metrics["mcp_analysis_workers"] == 1.0
    # `serve` froze the objects of its start-up imports out of garbage collection (process_gc.py).
    assert metrics["mcp_analysis_gc_frozen_objects"] > 50_000
    assert metrics["mcp_analysis_sessions_live"] >= 1
    assert "mcp_analysis_sessions_hibernated" in metrics and "mcp_analysis_sessions_stored" in metrics
    # Calls refused before a tool runs (an argument it does not take, a tool that does not exist) count as failed.
    async with a.client(TOKENS["bob"]) as client:
        assert (await client.call_tool("search", {"query": "revenue", "filter": "x"})).is_error
        with pytest.raises(MCPError):
            await client.call_tool("no_such_tool", {})
    after = metric_samples(httpx2.get(f"http://127.0.0.1:{a.port}/metrics", timeout=10).text)
    searches = 'mcp_analysis_tool_errors_total{tool="search"}'
    assert after[searches] == metrics[searches] + 1
    assert (
        after['mcp_analysis_tool_errors_total{tool="unknown"}']
        == metrics.get('mcp_analysis_tool_errors_total{tool="unknown"}', 0) + 1
    )
