"""The screen's -32602 for params no protocol version of the request's era accepts (pure: no server).

The wire tests send these over real stdio and HTTP; here each era's rule is pinned: a handshake
request is checked against the handshake versions, a request stating a modern version in its
`_meta` against that version, and a method its era does not have is left to the SDK (-32601).
"""

from __future__ import annotations

import json
from typing import Any

from mcp_analysis.server.jsonrpc_screen import screen

MODERN = {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}


def answer(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
    raw = screen(json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode())
    return None if raw is None else json.loads(raw)


def test_a_handshake_request_with_a_level_that_does_not_exist_names_the_levels() -> None:
    reply = answer("logging/setLevel", {"level": "verbose"})
    assert reply is not None and reply["error"]["code"] == -32602 and reply["id"] == 1
    message = reply["error"]["message"]
    assert message.startswith("Invalid params for logging/setLevel: level: Input should be 'alert'"), message
    assert answer("logging/setLevel", {"level": "warning"}) is None


def test_a_method_the_requests_era_does_not_have_is_left_to_the_sdk() -> None:
    assert answer("logging/setLevel", {"level": "verbose", **MODERN}) is None  # not a 2026-07-28 method
    assert answer("subscriptions/listen", {}) is None  # not a handshake-era method
    assert (
        answer(
            "logging/setLevel", {"level": "verbose", "_meta": {"io.modelcontextprotocol/protocolVersion": "2099-01-01"}}
        )
        is None
    )


def test_a_modern_request_is_checked_against_its_own_version() -> None:
    reply = answer("tools/call", {"arguments": {}, **MODERN})
    assert reply is not None and "name: Field required" in reply["error"]["message"], reply
    assert answer("tools/call", {"name": "search"}) is None  # a handshake request needs no _meta


def test_valid_requests_pass_unchanged() -> None:
    for method, params in (
        ("tools/call", {"name": "search", "arguments": {"query": "x"}}),
        ("tools/call", {"name": "search", "arguments": None}),
        ("resources/list", {"cursor": None}),
        (
            "initialize",
            {
                "protocolVersion": "2099-01-01",
                "capabilities": {},
                "clientInfo": {"name": "a", "version": "0"},
                "extra": 1,
            },
        ),
        ("ping", {}),
    ):
        assert answer(method, params) is None, (method, params)
