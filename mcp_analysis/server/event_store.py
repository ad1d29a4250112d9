"""Resumable streamable HTTP: the events of each SSE stream, kept for a while, replayed after `Last-Event-ID`.

A handshake-era HTTP client whose connection drops during a long call (an `execute_code` of a
minute) reconnects with the id of the last event it saw and gets the rest, the result included.
The SDK asks for it (`EventStore`) and sends 2025-11-25 clients the priming event (an id before
any data) on every stream once a store is set. Events are kept in this process's memory, bounded
by `server.resume_buffer_mb` (the oldest go first) and `server.resume_seconds`: a client that
comes back later, or after a restart, starts again. (A legacy session lives in the replica that
opened it, so resuming needs that replica whatever holds the events; 2026-07-28 requests are
sessionless and the SDK keeps no events for them.)

The SDK shares one store among all sessions and names a stream by its JSON-RPC request id, which
two sessions reuse: every event belongs to the session that stored it (`EventScope`, an ASGI
middleware, tells the store whose request or session task is running), and a `Last-Event-ID`
replays only the requesting session's own events. Event ids are random, not a counter.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp_types import JSONRPCMessage


class _Scope:
    """Whose events: a legacy session's (its id; learnt from the reply for the request that opens it)."""

    def __init__(self, session: str | None) -> None:
        self.session = session

    def owner(self) -> str:
        return self.session if self.session is not None else f"opening-{id(self)}"


_SCOPE: ContextVar[_Scope | None] = ContextVar("mcp_analysis_event_scope", default=None)


def _owner() -> str:
    scope = _SCOPE.get()
    return scope.owner() if scope is not None else "unscoped"


class EventScope:
    """ASGI middleware: the request (and a session's tasks, started from its opening request) knows
    whose events it stores and replays."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        given = dict(scope.get("headers", [])).get(b"mcp-session-id")
        holder = _Scope(given.decode("latin-1") if given else None)

        async def learn(message: Any) -> None:
            if holder.session is None and message.get("type") == "http.response.start":
                issued = dict(message.get("headers", [])).get(b"mcp-session-id")
                if issued:
                    holder.session = issued.decode("latin-1")
            await send(message)

        token = _SCOPE.set(holder)
        try:
            await self.app(scope, receive, learn)
        finally:
            _SCOPE.reset(token)


@dataclass
class _Event:
    owner: str
    stream: StreamId
    message: JSONRPCMessage | None  # None: a priming event (nothing to replay)
    size: int
    at: float


class BoundedEventStore(EventStore):
    """Events by id, in the order stored, within `max_bytes` (as JSON) and `max_seconds` of age."""

    def __init__(self, max_bytes: int, max_seconds: float) -> None:
        self.max_bytes = max_bytes
        self.max_seconds = max_seconds
        self.events: OrderedDict[EventId, _Event] = OrderedDict()
        self.streams: dict[tuple[str, StreamId], list[EventId]] = {}
        self.bytes = 0

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        size = 64 if message is None else 64 + len(message.model_dump_json(by_alias=True, exclude_none=True))
        event_id = secrets.token_urlsafe(12)
        owner = _owner()
        self.events[event_id] = _Event(owner, stream_id, message, size, time.monotonic())
        self.streams.setdefault((owner, stream_id), []).append(event_id)
        self.bytes += size
        self._trim()
        return event_id

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> StreamId | None:
        self._trim()
        seen = self.events.get(last_event_id)
        if seen is None or seen.owner != _owner():
            return None  # unknown, no longer kept, or another session's: nothing to resume
        stream = self.streams.get((seen.owner, seen.stream), [])
        for event_id in stream[stream.index(last_event_id) + 1 :]:
            event = self.events[event_id]
            if event.message is not None:
                await send_callback(EventMessage(event.message, event_id))
        return seen.stream

    def _trim(self) -> None:
        cutoff = time.monotonic() - self.max_seconds
        while self.events:
            event_id, oldest = next(iter(self.events.items()))
            if self.bytes <= self.max_bytes and oldest.at >= cutoff:
                break
            del self.events[event_id]
            self.bytes -= oldest.size
            key = (oldest.owner, oldest.stream)
            ids = self.streams[key]
            ids.remove(event_id)  # the oldest of its stream: first in its list
            if not ids:
                del self.streams[key]
