"""Resumable streamable HTTP: a client whose connection drops during a long call gets its result back.

Raw HTTP against a real `serve --http`, as a 2025-11-25 client speaks it: every SSE stream starts
with a priming event (an id, no data); a GET with `Last-Event-ID` replays what followed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.mcp_helpers import HttpServer, http_server

pytestmark = pytest.mark.anyio

VERSION = "2025-11-25"
SLOW = "import time\ntime.sleep(3)\n'finished after the drop'"


@pytest.fixture(scope="module")
def http(sample_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    with http_server(sample_db, log_dir=tmp_path_factory.mktemp("logs")) as server:
        yield server


def events(lines: Iterator[str]) -> Iterator[dict[str, str]]:
    """SSE events as {field: value} (the last value of each field), one per blank-line-ended block."""
    event: dict[str, str] = {}
    for line in lines:
        if not line:
            if event:
                yield event
            event = {}
            continue
        name, _, value = line.partition(":")
        event[name] = value.removeprefix(" ")


def post(session: str | None, body: dict[str, Any]) -> dict[str, Any]:
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": VERSION}
    if session:
        headers["Mcp-Session-Id"] = session
    return {"headers": headers, "json": body}


def start_session(client: httpx2.Client, url: str) -> str:
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    response = client.post(url, **post(None, hello))
    session = response.headers["mcp-session-id"]
    client.post(url, **post(session, {"jsonrpc": "2.0", "method": "notifications/initialized"}))
    return session


def test_a_dropped_stream_resumes_with_last_event_id(http: HttpServer) -> None:
    with httpx2.Client(timeout=60) as client:
        session, other = start_session(client, http.url), start_session(client, http.url)
        call = {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": "execute_code", "arguments": {"code": SLOW}},
        }
        with client.stream("POST", http.url, **post(session, call)) as response:
            priming = next(events(response.iter_lines()))
        # The connection is gone before the result: only the priming event was read.
        assert priming.get("id") and not priming.get("data")
        headers = {"Accept": "text/event-stream", "Mcp-Session-Id": session, "MCP-Protocol-Version": VERSION}
        # Another session (both number their requests alike) that names this event resumes nothing.
        stranger = {**headers, "Mcp-Session-Id": other, "Last-Event-ID": priming["id"]}
        with client.stream("GET", http.url, headers=stranger, timeout=30) as elsewhere:  # a replay would hang
            assert not [e for e in events(elsewhere.iter_lines()) if e.get("data")]
        with client.stream("GET", http.url, headers={**headers, "Last-Event-ID": priming["id"]}) as resumed:
            assert resumed.status_code == 200
            for event in events(resumed.iter_lines()):
                if event.get("data"):
                    message = json.loads(event["data"])
                    if message.get("id") == 7:
                        break
        assert message["result"]["structuredContent"]["value"] == "'finished after the drop'"


async def test_the_event_store_keeps_within_its_memory_bound() -> None:
    from mcp_types import JSONRPCNotification

    from mcp_analysis.server.event_store import BoundedEventStore

    store = BoundedEventStore(max_bytes=20_000, max_seconds=3600)
    note = JSONRPCNotification(jsonrpc="2.0", method="notifications/message", params={"data": "x" * 1000})
    first = await store.store_event("a", None)
    ids = [await store.store_event("a", note) for _ in range(100)]
    assert store.bytes <= 20_000 and len(store.events) < 25
    replayed: list[str] = []

    async def sent(event: Any) -> None:
        replayed.append(event.event_id)

    assert await store.replay_events_after(first, sent) is None  # too old now: nothing to resume
    assert await store.replay_events_after(ids[-3], sent) == "a"
    assert replayed == ids[-2:]
