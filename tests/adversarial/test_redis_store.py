"""Redis as the session store, attacked and run out of memory: what must hold.

One real redis-server (configured as an operator would: maxmemory, an eviction policy) and
two real `serve --http` replicas on it for the module, driven by real MCP clients; a test
touches Redis directly only to play an attacker, an operator or an outage. The byte cap
(`sessions.max_stored_mb`) must count what Redis really holds, so a Redis whose maxmemory is
above the cap never evicts a kept session; a full Redis is "full", not "unreachable", and does
not make replicas unready; an older signed state written back is refused on every replica
that saw a newer one; a Redis that lost its data answers kept handles as unknown, never with
a silent fresh session; and a reader of Redis learns nothing of what sessions hold.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
import redis as redis_client

from tests.adversarial.redis_cluster import (
    RestartableRedis,
    healthz,
    session_of,
    store_env,
    wait_ready,
)
from tests.mcp_helpers import HttpServer, http_server, text

pytestmark = pytest.mark.anyio

MIB = 1024 * 1024
CAP_MB = 2  # sessions.max_stored_mb
SESSION_CHARS = 33_000  # one kept string per session: just past a 32 KiB allocation class in Redis
FULL = "The session store is full"
PASSWORD_PART = "Hunter2-REDIS-PASSWORD"
PASSWORD = f"pa@ss:{PASSWORD_PART}"  # raw '@' and ':' inside: the URL's userinfo holds them as they are


def store_url(store: RestartableRedis) -> str:
    return f"redis://default:{PASSWORD}@127.0.0.1:{store.port}/0?password=pa%40ss%3A{PASSWORD_PART}"


@dataclass
class Replicas:
    redis: RestartableRedis
    a: HttpServer
    b: HttpServer

    def reset(self) -> None:
        """Redis as an operator starts it: no maxmemory, no session kept (the store's epoch and version
        counter stay: a test that empties Redis behind the replicas' backs does so on purpose)."""
        admin = self.redis.client()
        admin.config_set("maxmemory", 0)
        admin.config_set("maxmemory-policy", "noeviction")
        for key in admin.scan_iter(match="*"):
            if not key.endswith((b":epoch", b":clock")):
                admin.delete(key)
        admin.close()


@pytest.fixture(scope="module")
def replicas(sample_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replicas]:
    logs = tmp_path_factory.mktemp("redis-store")
    store = RestartableRedis(logs, requirepass=PASSWORD)
    settings = {"sessions__max_stored_mb": CAP_MB, "sandbox__max_state_mb": 1, "sessions__max_stored": 100_000}
    with contextlib.ExitStack() as stack:
        store.start()
        stack.callback(store.stop)
        servers = [
            stack.enter_context(
                http_server(
                    sample_db, env=store_env(store.port, logs / n, url=store_url(store), **settings), log_dir=logs
                )
            )
            for n in ("a", "b")
        ]
        for server in servers:
            wait_ready(server)
        yield Replicas(store, *servers)


@pytest.fixture
def fresh(replicas: Replicas) -> Replicas:
    replicas.reset()
    for server in (replicas.a, replicas.b):
        wait_ready(server, timeout=30)
    return replicas


def filler_code(n: int) -> str:
    return f"filler = '{n:06d}' + 'y' * {SESSION_CHARS}"


async def test_a_redis_at_maxmemory_above_the_cap_never_evicts_a_kept_session(fresh: Replicas) -> None:
    # One anonymous client keeps session after session of ~33 KB until the cap refuses it. The
    # cap must count what Redis holds (allocation classes, fields, indexes, markers), not the
    # record and dump bytes alone (~1.24x less): counted short, Redis passes maxmemory while the
    # cap still has room and evicts the oldest sessions (volatile-ttl), another client's among them.
    server, admin = fresh.a, fresh.redis.client()
    admin.config_set("maxmemory-policy", "volatile-ttl")
    async with server.client() as victim:
        # The victim's session is as large as the filler's (so Redis's first large writes, which
        # cost it some memory once, are behind us when the baseline is read).
        code = f"victim_total = 12345\nvictim_notes = 'v' * {SESSION_CHARS}"
        handle = session_of(await victim.call_tool("execute_code", {"code": code}))
        baseline = admin.info("memory")["used_memory"]
        # maxmemory 15% above the cap: room for Redis itself, not for an undercount.
        admin.config_set("maxmemory", baseline + int(CAP_MB * MIB * 1.15))
        refused = 0
        async with server.client() as filler:
            for n in range(400):
                result = await filler.call_tool("execute_code", {"code": filler_code(n)})
                if result.is_error:
                    assert FULL in text(result) and "sessions.max_stored_mb" in text(result), text(result)
                    refused += 1
                    if refused == 3:
                        break
                else:
                    assert result.structured_content["success"], text(result)
        stats = admin.info("stats")
        memory = admin.info("memory")
        assert refused == 3, "the cap never refused a session"
        assert stats["evicted_keys"] == 0, f"Redis evicted {stats['evicted_keys']} keys"
        assert memory["used_memory"] <= memory["maxmemory"]
        again = await victim.call_tool("execute_code", {"code": "victim_total", "session": handle})
        assert not again.is_error and again.structured_content["value"] == "12345", text(again)
    admin.close()


async def test_a_full_redis_is_full_not_unreachable_and_replicas_stay_ready(fresh: Replicas) -> None:
    # Redis with noeviction, past its maxmemory (set below what the cap allows: a misconfiguration,
    # or other data in the same Redis). Redis still answers, so calls are told the store is full
    # (never "cannot be reached ... OOM"), /healthz stays 200 (a balancer must not pull replicas
    # that are as healthy as their store), and nothing more is written past maxmemory.
    server, admin = fresh.a, fresh.redis.client()
    async with server.client() as victim, server.client() as filler:
        handle = session_of(await victim.call_tool("execute_code", {"code": "victim_total = 12345"}))
        for n in range(5):
            session_of(await filler.call_tool("execute_code", {"code": filler_code(n)}))
        used = admin.info("memory")["used_memory"]
        admin.config_set("maxmemory", used - 64 * 1024)  # Redis is full now
        statuses = [healthz(server).status_code]
        on_victim = await victim.call_tool("execute_code", {"code": "victim_total", "session": handle})
        statuses.append(healthz(server).status_code)
        refused = []
        for n in range(5, 8):
            refused.append(await filler.call_tool("execute_code", {"code": filler_code(n)}))
            statuses.append(healthz(server).status_code)
        for _ in range(12):
            await anyio.sleep(0.25)
            statuses.append(healthz(server).status_code)
        for result in (on_victim, *refused):
            message = text(result)
            assert result.is_error and FULL in message and "maxmemory" in message, message
            assert "cannot be reached" not in message and "OOM" not in message, message
        assert admin.info("memory")["used_memory"] <= used  # nothing more was written
        assert set(statuses) == {200}, statuses
        # Room again (the operator raised maxmemory): nothing was lost.
        admin.config_set("maxmemory", 0)
        back = await victim.call_tool("execute_code", {"code": "victim_total", "session": handle})
        assert not back.is_error and back.structured_content["value"] == "12345", text(back)
    admin.close()


async def answered_after_retries(client: Any, arguments: dict[str, Any], deadline: float = 20.0) -> Any:
    """`execute_code` called again while the server says the store cannot be reached and to retry
    (a pooled connection to the restarted Redis may be closed on first use): what a client does."""
    with anyio.fail_after(deadline):
        while True:
            result = await client.call_tool("execute_code", arguments)
            if not (result.is_error and "Retry shortly" in text(result)):
                return result
            await anyio.sleep(0.5)


def value(result: object) -> str:
    assert not getattr(result, "is_error", True), text(result)
    return str(result.structured_content["value"])  # type: ignore[attr-defined]


def session_records(admin: redis_client.Redis) -> list[bytes]:
    return sorted(admin.scan_iter(match="*:r2:s:*"))


async def test_an_older_signed_state_written_back_is_refused_on_every_replica(fresh: Replicas) -> None:
    # The signature covers the version and every replica remembers the newest version it saw:
    # an older signed record written back over a newer one (balance 100 over balance 0) must not
    # load anywhere, and claiming a newer version for it breaks its signature.
    admin = fresh.redis.client()
    async with fresh.a.client() as on_a, fresh.b.client() as on_b:
        handle = session_of(await on_a.call_tool("execute_code", {"code": "balance = 100"}))
        assert value(await on_b.call_tool("execute_code", {"code": "balance", "session": handle})) == "100"
        [key] = session_records(admin)
        older = admin.dump(key)  # what an attacker with access to Redis keeps
        assert value(await on_b.call_tool("execute_code", {"code": "balance = 0\nbalance", "session": handle})) == "0"
        assert value(await on_a.call_tool("execute_code", {"code": "balance", "session": handle})) == "0"
        newer = admin.dump(key)
        admin.restore(key, 0, older, replace=True)
        for client in (on_a, on_b):
            result = await client.call_tool("execute_code", {"code": "balance", "session": handle})
            assert result.is_error, text(result)
            assert "older (version" in text(result) and "than one this server has already seen" in text(result)
        # Claiming a newer version for the older state breaks its signature.
        admin.hset(key, "v", 10**12)
        for client in (on_a, on_b):
            result = await client.call_tool("execute_code", {"code": "balance", "session": handle})
            assert result.is_error and "fails its signature" in text(result), text(result)
        admin.restore(key, 0, newer, replace=True)  # the real state back: it loads again
        assert value(await on_b.call_tool("execute_code", {"code": "balance", "session": handle})) == "0"
    admin.close()


@pytest.mark.parametrize("damage", ["not a number", "missing"])
async def test_a_damaged_version_field_is_a_clear_error(fresh: Replicas, damage: str) -> None:
    # A damaged version field is named in the call's error: never a bare "Error executing tool"
    # with a traceback in the log.
    admin = fresh.redis.client()
    logged = len(fresh.a.log.read_bytes())
    async with fresh.a.client() as client:
        handle = session_of(await client.call_tool("execute_code", {"code": "kept = 1"}))
        [key] = session_records(admin)
        if damage == "missing":
            admin.hdel(key, "v")
        else:
            admin.hset(key, "v", "1.5e3")
        result = await client.call_tool("execute_code", {"code": "kept", "session": handle})
        assert result.is_error and f"its version field in the session store is {damage}" in text(result), text(result)
        assert "Error executing tool execute_code: Unknown or expired" in text(result)
        # The server keeps serving, and a new session is kept as usual.
        other = session_of(await client.call_tool("execute_code", {"code": "kept = 2"}))
        assert value(await client.call_tool("execute_code", {"code": "kept", "session": other})) == "2"
    admin.close()
    assert b"Traceback" not in fresh.a.log.read_bytes()[logged:]


def everything_in(admin: redis_client.Redis) -> bytes:
    """Every key name and every value Redis holds, as one blob (what a reader of Redis sees)."""
    seen = []
    for key in admin.scan_iter(match="*"):
        seen.append(key)
        kind = admin.type(key)
        if kind == b"string":
            seen.append(admin.get(key) or b"")
        elif kind == b"hash":
            seen.extend(b"%s=%s" % item for item in admin.hgetall(key).items())
        elif kind == b"zset":
            seen.extend(member for member, _ in admin.zrange(key, 0, -1, withscores=True))
        else:
            raise AssertionError(f"unexpected {kind!r} at {key!r}")
    return b"\n".join(seen)


async def test_a_reader_of_redis_learns_nothing_of_the_sessions(fresh: Replicas) -> None:
    # Records hold the code, outputs and citations of every principal, and key names would show
    # handles (an anonymous client's credential): records are encrypted, names are keyed digests.
    admin = fresh.redis.client()
    code = "formula = 'ALPHA-7731-CONFIDENTIAL'\nprint('OUTPUT-MARKER-' + formula[::-1])\nformula.lower()"
    async with fresh.a.client() as client:
        found = await client.call_tool("search", {"query": "phishing campaign", "limit": 1})
        handle = session_of(found)
        hit = found.structured_content["results"][0]
        ran = await client.call_tool("execute_code", {"code": code, "session": handle})
        assert "LAITNEDIFNOC" in text(ran)
        cited = await client.call_tool("cite", {"chunk_ids": [hit["chunk_id"]], "session": handle})
        assert not cited.is_error, text(cited)
    stored = everything_in(admin)
    assert len(session_records(admin)) == 1 and len(stored) > 1000
    needles = ["ALPHA-7731", "alpha-7731", "LAITNEDIFNOC", "OUTPUT-MARKER", "formula", "phishing", handle]
    needles += [hit["chunk_id"], hit["document_title"], hit["content"][:40], "execute_code", "anonymous"]
    for needle in needles:
        assert needle.encode() not in stored, needle
    admin.close()


async def test_a_redis_that_lost_its_data_answers_kept_handles_as_unknown(fresh: Replicas) -> None:
    # A handle whose session was kept, then lost with Redis's data (a restart without persistence,
    # a flush), is answered as unknown or expired: never a silent fresh session under it (whose
    # next read is a NameError).
    admin = fresh.redis.client()
    async with fresh.a.client() as on_a, fresh.b.client() as on_b:
        kept = session_of(await on_a.call_tool("execute_code", {"code": "victim_total = 12345"}))
        assert value(await on_b.call_tool("execute_code", {"code": "victim_total", "session": kept})) == "12345"
        admin.flushall()  # what a restart without persistence leaves
        admin.close()
        for client in (on_a, on_b):
            lost = await client.call_tool("execute_code", {"code": "victim_total", "session": kept})
            assert lost.is_error and "Unknown or expired analysis session" in text(lost), text(lost)
            assert "new_analysis" in text(lost) and "NameError" not in text(lost)
        # The store's new life: new sessions are kept and continue on either replica.
        again = session_of(await on_a.call_tool("execute_code", {"code": "second = 2"}))
        assert value(await on_b.call_tool("execute_code", {"code": "second", "session": again})) == "2"
        # A fresh redis-server on the same port (the process restarted, nothing persisted).
        fresh.redis.stop()
        fresh.redis.start()
        for server in (fresh.a, fresh.b):
            wait_ready(server, timeout=60)
        for client in (on_a, on_b):
            lost = await answered_after_retries(client, {"code": "second", "session": again})
            assert lost.is_error and "Unknown or expired analysis session" in text(lost), text(lost)
        third = session_of(await on_b.call_tool("execute_code", {"code": "third = 3"}))
        assert value(await on_a.call_tool("execute_code", {"code": "third", "session": third})) == "3"


async def test_the_redis_password_is_never_shown(fresh: Replicas) -> None:
    # During an outage the store's URL reaches tool errors, /healthz (for a token holder when
    # tokens are configured; for anyone here) and the server log: none may show the password,
    # whatever characters it holds (raw '@' and ':') and wherever the URL carries it (the
    # replicas' URL has it in its userinfo and as ?password=).
    server = fresh.a
    logged = len(server.log.read_bytes())
    async with server.client() as client:
        kept = session_of(await client.call_tool("execute_code", {"code": "x = 1"}))  # the password works
        fresh.redis.stop()
        try:
            lost = await client.call_tool("execute_code", {"code": "x", "session": kept})
            assert lost.is_error and "cannot be reached" in text(lost), text(lost)
            shown = [text(lost), wait_ready(server, ready=False, timeout=60).text]
        finally:
            fresh.redis.start()
    wait_ready(server, timeout=60)
    shown.append(server.log.read_bytes()[logged:].decode(errors="replace"))
    assert "127.0.0.1" in shown[1] and "redis://***@127.0.0.1" in shown[1]  # where the store is, not its password
    for where in shown:
        assert PASSWORD_PART not in where and "pa@ss" not in where and "pa%40ss" not in where, where
