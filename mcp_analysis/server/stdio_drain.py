"""Requests read before stdin ends are answered before the server stops.

When stdin ends, the SDK's dispatcher cancels every request still running ("their callers
are gone"). But a client that half-closes after its last request (``cat requests | serve``,
a socket shut for writing) is waiting for the answers, and a reader that sees the end of
stdin in the same turn as the last line would cancel even a ``ping``. So the end of the
read stream is held back until every request read so far has been answered (or cancelled
by the client), at most `limit` seconds: a request still running then is cancelled as before.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage


class Unanswered:
    """The ids of the client's requests read and not yet answered (a client may reuse an id)."""

    def __init__(self) -> None:
        self._open: Counter[Any] = Counter()
        self._none_left = anyio.Event()
        self._none_left.set()

    def read(self, item: object) -> None:
        if not isinstance(item, SessionMessage):
            return
        message = item.message
        if isinstance(message, types.JSONRPCRequest):
            if self._none_left.is_set():
                self._none_left = anyio.Event()
            self._open[_key(message.id)] += 1
        elif isinstance(message, types.JSONRPCNotification) and message.method == "notifications/cancelled":
            params = message.params or {}
            self._close(params.get("requestId"))  # a cancelled request gets no answer

    def answered(self, item: object) -> None:
        if isinstance(item, SessionMessage) and isinstance(item.message, types.JSONRPCResponse | types.JSONRPCError):
            self._close(item.message.id)

    async def all_answered(self, limit: float) -> None:
        with anyio.move_on_after(limit):
            await self._none_left.wait()

    def _close(self, request_id: Any) -> None:
        key = _key(request_id)
        if self._open[key] <= 0:
            self._open.pop(key, None)
            return
        self._open[key] -= 1
        if not self._open[key]:
            del self._open[key]
        if not self._open:
            self._none_left.set()


def _key(request_id: Any) -> Any:
    # JSON-RPC ids are strings or integers; the SDK may hand back an int id as given.
    return request_id if isinstance(request_id, str | int) else repr(request_id)


class _Wrapping:
    """A stream standing in for the SDK's: what is not overridden is the inner stream's."""

    def __init__(self, inner: Any, unanswered: Unanswered) -> None:
        self._inner = inner
        self._unanswered = unanswered

    def __getattr__(self, name: str) -> Any:  # last_context, aclose, close, clone...
        return getattr(self._inner, name)

    async def __aenter__(self) -> Any:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> Any:
        return await self._inner.__aexit__(*exc)


class DrainingReadStream(_Wrapping):
    """The SDK's read stream, whose end waits (bounded) for the requests it carried to be answered."""

    def __init__(self, inner: Any, unanswered: Unanswered, limit: float) -> None:
        super().__init__(inner, unanswered)
        self._limit = limit

    def __aiter__(self) -> DrainingReadStream:
        return self

    async def __anext__(self) -> Any:
        try:
            item = await self._inner.__anext__()
        except StopAsyncIteration:
            await self._unanswered.all_answered(self._limit)
            raise
        self._unanswered.read(item)
        return item

    async def receive(self) -> Any:
        try:
            return await self.__anext__()
        except StopAsyncIteration:
            raise anyio.EndOfStream from None


class AnsweringWriteStream(_Wrapping):
    """The SDK's write stream, noting each answer as it goes out."""

    async def send(self, item: Any) -> None:
        await self._inner.send(item)
        self._unanswered.answered(item)
