"""Resumable streamable HTTP: the events of each SSE stream, kept for a while, replayed after `Last-Event-ID`.

A handshake-era HTTP client whose connection drops during a long call (an `execute_code` of a
minute) reconnects with the id of the last event it saw and gets the rest, the result included.
The SDK asks for it (`EventStore`) and sends 2025-11-25 clients the priming event (an id before
any data) on every stream once a store is set. Events are kept in this process's memory, bounded
by `server.resume_buffer_mb` (the oldest go first) and `server.resume_seconds`: a client that
comes back later, or after a restart, starts again. (A legacy session lives in the replica that
opened it, so resuming needs that replica whatever holds the events; 2026-07-28 requests are
sessionless and the SDK keeps no events for them.)
"""

from __future__ import annotations

import itertools
import time
from collections import OrderedDict
from dataclasses import dataclass

from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp_types import JSONRPCMessage


@dataclass
class _Event:
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
        self.streams: dict[StreamId, list[EventId]] = {}
        self.bytes = 0
        self._ids = itertools.count(1)

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        size = 64 if message is None else 64 + len(message.model_dump_json(by_alias=True, exclude_none=True))
        event_id = f"{next(self._ids)}"
        self.events[event_id] = _Event(stream_id, message, size, time.monotonic())
        self.streams.setdefault(stream_id, []).append(event_id)
        self.bytes += size
        self._trim()
        return event_id

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> StreamId | None:
        self._trim()
        seen = self.events.get(last_event_id)
        if seen is None:
            return None  # unknown, or no longer kept: the SDK answers that there is nothing to resume
        stream = self.streams.get(seen.stream, [])
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
            ids = self.streams[oldest.stream]
            ids.remove(event_id)  # the oldest of its stream: first in its list
            if not ids:
                del self.streams[oldest.stream]
