"""Another client cannot wipe a session that lives only in memory by opening many sessions.

A legacy (2025-era) HTTP client's session lives only in the server's memory: dropped, its
variables are gone. At `sessions.max_sessions` the server drops only sessions it can bring
back (kept in the store) or that hold nothing worth keeping; a new session that would need
another one dropped is refused with an error that names the limit and what to do. What one
client may hold that way is bounded too (`sessions.max_live_per_client`: per bearer
principal, else per client address), so one client cannot take every slot.

Through a real `serve --http` process: the victim is the SDK's legacy client, the attacker
speaks the wire by hand and leaves its sessions open (tests/adversarial/http_wire.py).
"""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest

from tests.adversarial.http_wire import LegacyWire, RefusedError, flood, is_tool_error, sdk_client, tool_text
from tests.mcp_helpers import HttpServer, http_server, text

pytestmark = pytest.mark.anyio

VICTIM, ATTACKER, BYSTANDER = "10.0.0.1", "10.0.0.66", "10.0.0.2"
MAX_SESSIONS = 200


def env_for(tmp_path: Path, **sessions: object) -> dict[str, str]:
    env = {
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "MCP_ANALYSIS_SESSIONS__DIR": str(tmp_path / "sessions"),
        "MCP_ANALYSIS_SESSIONS__MAX_SESSIONS": str(MAX_SESSIONS),
    }
    env.update({f"MCP_ANALYSIS_SESSIONS__{k.upper()}": str(v) for k, v in sessions.items()})
    return env


def distinct_address(n: int) -> str:
    return f"10.1.{n // 250}.{n % 250 + 1}"


async def legacy_call(server: HttpServer, http: httpx2.AsyncClient, address: str, tool: str, args: dict) -> str:
    """Open a legacy session at `address`, make one call, leave the session open: "ok" or the refusal's text."""
    wire = LegacyWire(server, http, address)
    try:
        await wire.open()
        reply = await wire.call_tool(tool, args)
    except RefusedError as refused:
        return refused.body
    return tool_text(reply) if is_tool_error(reply) else "ok"


async def victim_reads(victim: object, expected_session: str) -> None:
    result = await victim.call_tool("execute_code", {"code": "victim_total"})  # type: ignore[attr-defined]
    assert not result.is_error and result.structured_content["success"], text(result)
    assert result.structured_content["value"] == "12345"
    assert result.structured_content["session"] == expected_session


async def test_250_sessions_of_another_client_leave_a_legacy_clients_variables(sample_db: Path, tmp_path: Path) -> None:
    with http_server(sample_db, env=env_for(tmp_path), log_dir=tmp_path) as server:
        async with sdk_client(server, VICTIM, mode="legacy") as victim:
            first = await victim.call_tool("execute_code", {"code": "victim_total = 12345"})
            session = first.structured_content["session"]
            async with sdk_client(server, ATTACKER) as modern:  # each call without a handle: a new kept session
                for n in range(250):
                    result = await modern.call_tool("execute_code", {"code": f"mine = {n}"})
                    assert not result.is_error and result.structured_content["success"], text(result)
            await victim_reads(victim, session)
            async with httpx2.AsyncClient(timeout=httpx2.Timeout(120.0)) as http:
                outcomes = await flood(
                    250, lambda n: legacy_call(server, http, distinct_address(n), "list_documents", {"limit": 1})
                )
            refused = [o for o in outcomes if o != "ok"]
            assert all("sessions.max_sessions" in o for o in refused), refused[:3]
            await victim_reads(victim, session)


async def test_one_client_cannot_take_every_session_a_legacy_client_needs(sample_db: Path, tmp_path: Path) -> None:
    env = env_for(tmp_path, max_live_per_client=20)
    with http_server(sample_db, env=env, log_dir=tmp_path) as server:
        async with sdk_client(server, VICTIM, mode="legacy") as victim:
            first = await victim.call_tool("execute_code", {"code": "victim_total = 12345"})
            session = first.structured_content["session"]
            async with httpx2.AsyncClient(timeout=httpx2.Timeout(120.0)) as http:
                # One address: its first 20 sessions, then a clear refusal.
                same = await flood(30, lambda n: legacy_call(server, http, ATTACKER, "execute_code", {"code": "x = 1"}))
                assert same.count("ok") == 20, same  # in any order: 8 at a time
                assert all("sessions.max_live_per_client" in o and "20" in o for o in same if o != "ok"), same
                async with sdk_client(server, BYSTANDER, mode="legacy") as bystander:
                    other = await bystander.call_tool("execute_code", {"code": "1 + 1"})
                    assert other.structured_content["value"] == "2", text(other)
                # Many addresses (220 more sessions): the server is full, nothing it holds is dropped.
                many = await flood(
                    220, lambda n: legacy_call(server, http, distinct_address(n), "execute_code", {"code": f"x = {n}"})
                )
            refused = [o for o in many if o != "ok"]
            assert refused and all("sessions.max_sessions" in o and str(MAX_SESSIONS) in o for o in refused), refused[
                :3
            ]
            assert len(many) - len(refused) <= MAX_SESSIONS - 20
            await victim_reads(victim, session)
            # Sessions kept in the store still work when memory is full of ones that are not.
            async with sdk_client(server, BYSTANDER) as modern:
                kept = await modern.call_tool("execute_code", {"code": "y = 2\ny * 21"})
                assert not kept.is_error and kept.structured_content["value"] == "42", text(kept)


async def test_without_a_store_anonymous_clients_are_bounded_per_address(sample_db: Path, tmp_path: Path) -> None:
    """With sessions.persist off, every session lives only in memory: the same rules hold for handles."""
    env = env_for(tmp_path, persist="false", max_live_per_client=30)
    with http_server(sample_db, env=env, log_dir=tmp_path) as server:
        async with sdk_client(server, VICTIM) as victim:
            first = await victim.call_tool("execute_code", {"code": "victim_total = 12345"})
            handle = first.structured_content["session"]
            async with sdk_client(server, ATTACKER) as attacker:
                outcomes = []
                for n in range(40):
                    result = await attacker.call_tool("execute_code", {"code": f"x = {n}"})
                    outcomes.append(text(result) if result.is_error else "ok")
            assert outcomes[:30] == ["ok"] * 30, outcomes[:30]
            assert all("sessions.max_live_per_client" in o for o in outcomes[30:]), outcomes[30:]
            again = await victim.call_tool("execute_code", {"code": "victim_total", "session": handle})
            assert again.structured_content["value"] == "12345", text(again)
