"""Legacy (2025-era) HTTP sessions: bounded per client and in total, short-lived until used, counted in memory.

The SDK's session manager opens a session for every ``initialize`` and keeps it until the
client deletes it or it idles for its timeout; at its cap every new legacy client is refused.
Left alone, a client that sends ``initialize`` and walks away 10,000 times would lock every
legacy client out for `sessions.ttl_seconds`. So, in front of the SDK (`LegacySessionGuard`):

- a session that has made no call yet (only ``initialize``, ``ping`` and notifications) ends
  after `sessions.legacy_unused_ttl_seconds`; its first call gives it `sessions.ttl_seconds`
  (a client's open GET stream keeps it meanwhile, as the SDK does for any request in flight);
- one client (its bearer principal, else its address: session/clients.py) may hold at most
  `sessions.max_live_per_client` open sessions, and all together at most `sessions.max_sessions`;
- each open session is counted in the memory budget (`LEGACY_SESSION_BYTES`, session/memory.py),
  and a new one is refused while the budget has no room for it.

A refused ``initialize`` gets a JSON-RPC error naming the bound and what to do, with
``Retry-After``. Requests on open sessions pass through untouched (one dict lookup), apart from
the first requests of a session not used yet, whose body is read once to see whether it is a call.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from mcp_analysis.config import Settings
from mcp_analysis.server.sdk_compat import set_idle_timeout
from mcp_analysis.session.clients import client_label

if TYPE_CHECKING:
    from mcp.server.streamable_http import StreamableHTTPServerTransport

    from mcp_analysis.session.memory import MemoryBudget

log = logging.getLogger(__name__)

#: What one open legacy session costs the server (transport, streams, connection state): ~41 KB
#: measured with 10,000 bare `initialize`s (bench/session_capacity.py), rounded up.
LEGACY_SESSION_BYTES = 48 * 1024
#: Requests that do not make a session "used": the handshake and liveness checks.
_NOT_CALLS = frozenset({"initialize", "ping"})


class LegacySessions:
    """The open legacy sessions by client, and those that have not made a call yet."""

    def __init__(
        self,
        settings: Settings,
        open_sessions: Callable[[], Mapping[str, StreamableHTTPServerTransport]],
        memory: Callable[[], MemoryBudget | None],
    ) -> None:
        self.settings = settings
        self.open_sessions = open_sessions
        self.memory = memory
        self._client_of: dict[str, str] = {}
        self._by_client: dict[str, set[str]] = {}
        self._unused: set[str] = set()
        self._opening: dict[str, int] = {}  # opening requests in flight, by client
        #: New sessions refused, by bound ("client", "total", "memory").
        self.refused: dict[str, int] = {"client": 0, "total": 0, "memory": 0}

    def bytes_held(self) -> int:
        """Open sessions and admitted openings: a place counts from its admission, or parallel
        openings would all pass one check of the memory budget before any of them is open."""
        return (len(self.open_sessions()) + sum(self._opening.values())) * LEGACY_SESSION_BYTES

    async def admit(self, client: str) -> str | None:
        """Why `client` may not open another session now, or None: then it holds a place until `settled`."""
        s = self.settings.sessions
        mine = len(self._prune(client)) + self._opening.get(client, 0)
        if mine >= s.max_live_per_client:
            self.refused["client"] += 1
            return (
                f"This client ({client}) already holds {mine} open legacy HTTP sessions, the most one client "
                f"may hold (sessions.max_live_per_client = {s.max_live_per_client}). End sessions you no longer "
                f"use (HTTP DELETE), reuse one, or retry when unused ones end "
                f"(sessions.legacy_unused_ttl_seconds = {s.legacy_unused_ttl_seconds:g})."
            )
        total = len(self.open_sessions()) + sum(self._opening.values())
        if total >= s.max_sessions:
            self.refused["total"] += 1
            return (
                f"The server holds {total} open legacy HTTP sessions, its limit (sessions.max_sessions = "
                f"{s.max_sessions}). Retry shortly: sessions that make no call end after "
                f"{s.legacy_unused_ttl_seconds:g} s; or use a 2026-07-28 client (sessionless)."
            )
        memory = self.memory()
        if memory is not None:
            memory.overheads["legacy HTTP sessions"] = self.bytes_held
            if not await memory.room_for(LEGACY_SESSION_BYTES):
                self.refused["memory"] += 1
                return (
                    f"The server's memory for analysis sessions is full ({memory.budget // 2**20} MB, "
                    "sessions.max_memory_mb); no new legacy HTTP session can open now. Retry shortly."
                )
        self._opening[client] = self._opening.get(client, 0) + 1
        return None

    def settled(self, client: str) -> None:
        """`client`'s opening request is over (its session, if any, is `opened` by now)."""
        left = self._opening.get(client, 0) - 1
        if left > 0:
            self._opening[client] = left
        else:
            self._opening.pop(client, None)

    def opened(self, session_id: str, client: str) -> None:
        """The SDK opened `session_id` for `client`: it ends soon unless it makes a call."""
        self._client_of[session_id] = client
        self._by_client.setdefault(client, set()).add(session_id)
        self._unused.add(session_id)
        transport = self.open_sessions().get(session_id)
        if transport is not None:
            set_idle_timeout(transport, self.settings.sessions.legacy_unused_ttl_seconds)
        if len(self._client_of) > 2 * len(self.open_sessions()) + 1000:
            self._prune_all()  # sessions that ended while their client never came back

    def unused(self, session_id: str) -> bool:
        return session_id in self._unused

    def used(self, session_id: str) -> None:
        """`session_id` made a call: it lives `sessions.ttl_seconds` without one from now on."""
        self._unused.discard(session_id)
        transport = self.open_sessions().get(session_id)
        if transport is not None:
            set_idle_timeout(transport, self.settings.sessions.ttl_seconds)

    def _prune(self, client: str) -> set[str]:
        """`client`'s sessions that are still open (ended ones are forgotten here)."""
        mine = self._by_client.get(client)
        if not mine:
            return set()
        live = self.open_sessions()
        for session_id in [s for s in mine if s not in live]:
            self._forget(session_id)
        return self._by_client.get(client, set())

    def _prune_all(self) -> None:
        live = self.open_sessions()
        for session_id in [s for s in self._client_of if s not in live]:
            self._forget(session_id)

    def _forget(self, session_id: str) -> None:
        client = self._client_of.pop(session_id, None)
        self._unused.discard(session_id)
        if client is not None:
            mine = self._by_client.get(client)
            if mine is not None:
                mine.discard(session_id)
                if not mine:
                    del self._by_client[client]


class LegacySessionGuard:
    """ASGI middleware in front of the SDK's session manager (see module docs). Innermost: after
    authentication (a principal is its own client) and after the JSON-RPC screen (bodies are valid)."""

    def __init__(self, app: Any, *, path: str, sessions: LegacySessions) -> None:
        self.app = app
        self.path = path.rstrip("/") or "/"
        self.sessions = sessions

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or (scope.get("path", "").rstrip("/") or "/") != self.path:
            await self.app(scope, receive, send)
            return
        session_id, version = _session_headers(scope)
        if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            await self.app(scope, receive, send)  # 2026-07-28: sessionless
            return
        if session_id is None and scope.get("method") == "POST":
            await self._open(scope, receive, send)
            return
        if session_id is not None and scope.get("method") == "POST" and self.sessions.unused(session_id):
            receive = self._watch_for_a_call(session_id, receive)
        await self.app(scope, receive, send)

    async def _open(self, scope: Any, receive: Any, send: Any) -> None:
        client = client_label(_principal(scope), _address(scope))
        refusal = await self.sessions.admit(client)
        if refusal is not None:
            log.warning("Refused a new legacy HTTP session: %s", refusal)
            retry = max(1, round(self.sessions.settings.sessions.legacy_unused_ttl_seconds))
            await _refuse(send, 429 if "max_live_per_client" in refusal else 503, refusal, retry)
            return

        pending = True  # this request's place, until its session is counted as open (or it failed)

        async def watch_opening(message: Any) -> None:
            nonlocal pending
            if message["type"] == "http.response.start" and message.get("status", 500) < 400:
                issued = dict(message.get("headers", [])).get(b"mcp-session-id")
                if issued and pending:
                    # One count at a time: the place turns into the open session, never both at once
                    # (a concurrent `admit` would see this client one session fuller than it is).
                    pending = False
                    self.sessions.settled(client)
                    self.sessions.opened(issued.decode("latin-1"), client)
            await send(message)

        try:
            await self.app(scope, receive, watch_opening)
        finally:
            if pending:
                self.sessions.settled(client)

    def _watch_for_a_call(self, session_id: str, receive: Any) -> Any:
        body = bytearray()

        async def watching() -> Any:
            message = await receive()
            if message["type"] == "http.request" and self.sessions.unused(session_id):
                body.extend(message.get("body", b""))
                if not message.get("more_body", False) and _is_a_call(bytes(body)):
                    self.sessions.used(session_id)
            return message

        return watching


def _session_headers(scope: Any) -> tuple[str | None, str | None]:
    session_id = version = None
    for name, value in scope.get("headers", []):
        if name == b"mcp-session-id":
            session_id = value.decode("latin-1")
        elif name == b"mcp-protocol-version":
            version = value.decode("latin-1")
    return session_id, version


def _principal(scope: Any) -> str | None:
    user = scope.get("user")
    return user.access_token.client_id if isinstance(user, AuthenticatedUser) else None


def _address(scope: Any) -> str | None:
    client = scope.get("client")
    return str(client[0]) if client else None


def _is_a_call(body: bytes) -> bool:
    """Whether a JSON-RPC body holds a request other than the handshake or a ping."""
    try:
        message = json.loads(body)
    except ValueError:
        return False
    messages = message if isinstance(message, list) else [message]
    return any(
        isinstance(m, dict) and "id" in m and isinstance(m.get("method"), str) and m["method"] not in _NOT_CALLS
        for m in messages
    )


async def _refuse(send: Any, status: int, message: str, retry_after: int) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": message}}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"retry-after", str(retry_after).encode()),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
