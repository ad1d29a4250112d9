"""A flood of bare `initialize` POSTs cannot lock legacy HTTP clients out.

Each legacy `initialize` opens a session on the server; unbounded, 10,000 of them from one
client would fill the SDK's cap, and every new legacy client would get 503 for
`sessions.ttl_seconds` (an hour). One client (bearer principal, else address) may hold `sessions.max_live_per_client`
open sessions, all clients together `sessions.max_sessions`, each counted in the memory
budget; and a session that has made no call ends after `sessions.legacy_unused_ttl_seconds`.
Through a real `serve --http` process; the attacker speaks the wire by hand (http_wire.py).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import anyio
import httpx2
import pytest

from tests.adversarial.http_wire import LegacyWire, flood, sdk_client
from tests.mcp_helpers import HttpServer, http_server, text

pytestmark = pytest.mark.anyio

VICTIM, ATTACKER, BYSTANDER = "10.0.0.1", "10.0.0.66", "10.0.0.2"
PER_CLIENT = 20
TOTAL = 60
# Long enough that the dozen requests filling the server fit in it on a loaded machine, once the
# server has loaded its search (the victim searches first: a starting server warms it up meanwhile):
# they took 0.06 s at load 5 on 2 cores. The test waits this long (and 2.5 s) for the unused one's end.
UNUSED_TTL = 4
HELD = 3600  # unused sessions outlive the test: what is measured is the bound, not their expiry


def env_for(tmp_path: Path, **sessions: object) -> dict[str, str]:
    env = {"XDG_DATA_HOME": str(tmp_path / "data"), "MCP_ANALYSIS_SESSIONS__DIR": str(tmp_path / "sessions")}
    env.update({f"MCP_ANALYSIS_SESSIONS__{k.upper()}": str(v) for k, v in sessions.items()})
    return env


async def bare_initialize(server: HttpServer, http: httpx2.AsyncClient, address: str) -> tuple[int, str]:
    response = await LegacyWire(server, http, address).initialize()
    return response.status_code, response.text


async def legacy_client_works(server: HttpServer, address: str) -> None:
    async with sdk_client(server, address, mode="legacy") as client:
        result = await client.call_tool("execute_code", {"code": "6 * 7"})
        assert result.structured_content["value"] == "42", text(result)


async def test_bare_initializes_cannot_lock_other_legacy_clients_out(sample_db: Path, tmp_path: Path) -> None:
    env = env_for(tmp_path, max_sessions=TOTAL, max_live_per_client=PER_CLIENT, legacy_unused_ttl_seconds=HELD)
    with http_server(sample_db, env=env, log_dir=tmp_path) as server:
        async with sdk_client(server, VICTIM, mode="legacy") as victim, httpx2.AsyncClient(timeout=60) as http:
            first = await victim.call_tool("execute_code", {"code": "victim_total = 12345"})
            assert first.structured_content["success"], text(first)

            # One address: its first sessions open, then 429 naming the bound.
            one = await flood(3 * PER_CLIENT, lambda n: bare_initialize(server, http, ATTACKER), parallel=16)
            statuses = Counter(status for status, _ in one)
            assert statuses == {200: PER_CLIENT, 429: 2 * PER_CLIENT}, statuses  # in any order: 16 at a time
            refused_one = [body for status, body in one if status == 429]
            assert all("sessions.max_live_per_client" in body and str(PER_CLIENT) in body for body in refused_one)
            await legacy_client_works(server, BYSTANDER)

            # Many addresses: the server fills up to its total, says so, and drops nothing in use.
            many = await flood(TOTAL, lambda n: bare_initialize(server, http, f"10.2.0.{n + 1}"))
            refused = [body for status, body in many if status != 200]
            assert refused and {s for s, _ in many if s != 200} == {503}
            assert len(many) - len(refused) <= TOTAL - PER_CLIENT - 1  # the victim's and the attacker's stay open
            assert all("sessions.max_sessions" in body and str(TOTAL) in body for body in refused), refused[:2]
            again = await victim.call_tool("execute_code", {"code": "victim_total"})
            assert again.structured_content["value"] == "12345", text(again)


async def test_sessions_that_made_no_call_end_soon_and_make_room(sample_db: Path, tmp_path: Path) -> None:
    env = env_for(tmp_path, max_sessions=12, legacy_unused_ttl_seconds=UNUSED_TTL)
    with http_server(sample_db, env=env, log_dir=tmp_path) as server:
        async with sdk_client(server, VICTIM, mode="legacy") as victim, httpx2.AsyncClient(timeout=60) as http:
            first = await victim.call_tool("execute_code", {"code": "victim_total = 12345"})
            assert first.structured_content["success"], text(first)
            searched = await victim.call_tool("search", {"query": "revenue", "limit": 1})  # the search loaded
            assert not searched.is_error, text(searched)
            unused, used = LegacyWire(server, http, ATTACKER), LegacyWire(server, http, ATTACKER)
            await unused.open()
            opened = anyio.current_time()  # `unused` ends UNUSED_TTL after its opening, which came before
            await used.open()
            assert (await used.post("tools/list")).status_code == 200  # a call: the session lives its full TTL
            # 12 places: the victim's, the two above, and up to 9 more (8 were seen once on a CI run,
            # a place still held elsewhere), then 503 naming the total.
            fill = [await bare_initialize(server, http, f"10.2.0.{n + 1}") for n in range(9)]
            statuses = [status for status, _ in fill]
            assert statuses.count(200) >= 8 and set(statuses) <= {200, 503}, statuses
            full = await bare_initialize(server, http, "10.3.0.1")
            assert full[0] == 503 and "sessions.max_sessions" in full[1], full
            await anyio.sleep_until(opened + UNUSED_TTL + 2.5)
            gone = await unused.post("tools/list")
            assert gone.status_code == 404, gone.text
            alive = await used.post("tools/list")
            assert alive.status_code == 200, alive.text
            await legacy_client_works(server, "10.3.0.1")  # room again: no lock-out
            again = await victim.call_tool("execute_code", {"code": "victim_total"})
            assert again.structured_content["value"] == "12345", text(again)


async def test_open_legacy_sessions_count_in_the_memory_budget(sample_db: Path, tmp_path: Path) -> None:
    # A 16 MB budget, 13 MB of it held by a legacy session's variable: room for at most 3 MB of open
    # legacy sessions (48 KB each: 64), far below the other bounds here (340 with an empty budget).
    env = env_for(tmp_path, max_memory_mb=16, max_live_per_client=10_000, legacy_unused_ttl_seconds=HELD)
    env["MCP_ANALYSIS_SANDBOX__MAX_STATE_MB"] = "14"
    with http_server(sample_db, env=env, log_dir=tmp_path) as server:
        async with sdk_client(server, VICTIM, mode="legacy") as victim, httpx2.AsyncClient(timeout=60) as http:
            held = await victim.call_tool("execute_code", {"code": f"x = 'a' * {13 * 2**20}\nlen(x)"})
            assert held.structured_content["value"] == str(13 * 2**20), text(held)
            outcomes = await flood(120, lambda n: bare_initialize(server, http, ATTACKER), parallel=16)
            again = await victim.call_tool("execute_code", {"code": "len(x)"})
            assert again.structured_content["value"] == str(13 * 2**20), text(again)
        opened = sum(1 for status, _ in outcomes if status == 200)
        refused = [body for status, body in outcomes if status != 200]
        # ~3 MB of room at 48 KB each is ~64; the variable's counted size (its dump) is a little
        # under 13 MB, so one or two more may open. An opening counts from its admission: 16 in
        # parallel must not all pass one check (73 opened under CI load when they did). Without
        # the budget 120 would (the other bounds: 10,000).
        assert 40 <= opened <= 66, opened
        assert refused and all("sessions.max_memory_mb" in body for body in refused), refused[:2]
