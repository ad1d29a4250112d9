"""HTTP connections that do not send a whole request are closed: no client may hold the server's files.

uvicorn keeps a connection that sent half a request line for as long as the client likes (its
keep-alive timeout applies only between requests, and any byte arriving cancels it), so a client
without a token could open connections until the process has no file left to accept another (1,024
under the usual soft limit) and nobody else is served. Two rules, on uvicorn's h11 protocol class
(its internals are fenced in this module, as the SDK's are in sdk_compat.py):

- a request must arrive whole, headers and body, within `server.request_read_seconds` of the
  connection's opening or of the previous response on it; one that does not is closed;
- at most `server.max_pending_connections` connections may be waiting for their request at once;
  one more closes the one that has waited longest among those of the client address with the most
  waiting. A flood of idle connections from one address pushes out its own; from many addresses,
  the oldest of each in turn, while a client that sends its request when it connects (as HTTP
  clients do) waits one round trip at most.

Closed connections are counted and logged at most once per `LOG_EVERY_SECONDS`: a flood must not
flood the log too. The rules act once a connection is accepted; so that a burst of connections
cannot use up the process's files before they act, the soft limit of open files is raised to the
hard one at start (`more_files`), and the connections accepted but not yet seen by the rules, and
those waiting, each stay within a quarter of it (`file_shares`: asyncio accepts a second round
before the first round's connections reach the protocol). Should the files run out all the same,
asyncio logs each refused accept with a traceback (up to 2,048 a second); `QuietAcceptErrors`
keeps one a minute, counted.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from collections import OrderedDict
from typing import TYPE_CHECKING

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

if TYPE_CHECKING:
    from collections.abc import Callable

log = logging.getLogger(__name__)

LOG_EVERY_SECONDS = 60.0
MAX_ACCEPT_BURST = 2048  # uvicorn's default backlog
_RECEIVING = (h11.IDLE, h11.SEND_BODY)  # the client's side of the connection: its request not yet whole


class WaitingConnections:
    """The connections waiting for their request, by client address, oldest first, with the two rules' bounds."""

    def __init__(self, limit: int, seconds: float) -> None:
        self.limit = limit
        self.seconds = seconds
        self._waiting: dict[object, str] = {}  # connection -> its client's address
        self._by_client: dict[str, OrderedDict[object, Callable[[], None]]] = {}
        self._closed = {"slow": 0, "crowded": 0}
        self._logged = 0.0

    def __len__(self) -> int:
        return len(self._waiting)

    def wait(self, connection: object, close: Callable[[], None], client: str = "") -> None:
        """`connection` (from the address `client`) begins to wait for a request; `close` ends it. Beyond
        the limit, the connection waiting longest of the client with the most waiting is closed: a flood
        from one address pushes out its own, and a legitimate client's connection waits a round trip at most."""
        self._waiting[connection] = client
        self._by_client.setdefault(client, OrderedDict())[connection] = close
        while len(self._waiting) > self.limit:
            busiest = max(self._by_client.values(), key=len)
            oldest, drop = next(iter(busiest.items()))
            self.done(oldest)
            self._close(drop, "crowded")

    def done(self, connection: object) -> None:
        """`connection`'s request arrived whole, or it closed."""
        self._pop(connection)

    def too_slow(self, connection: object) -> None:
        """`connection`'s request did not arrive within `seconds`."""
        close = self._pop(connection)
        if close is not None:
            self._close(close, "slow")

    def _pop(self, connection: object) -> Callable[[], None] | None:
        client = self._waiting.pop(connection, None)
        if client is None:
            return None
        theirs = self._by_client[client]
        close = theirs.pop(connection)
        if not theirs:
            del self._by_client[client]
        return close

    def _close(self, close: Callable[[], None], why: str) -> None:
        close()
        self._closed[why] += 1
        now = time.monotonic()
        if now - self._logged >= LOG_EVERY_SECONDS:
            self._logged = now
            slow, crowded = self._closed["slow"], self._closed["crowded"]
            log.warning(
                "Closed %d HTTP connection(s) whose request did not arrive whole within %g s "
                "(server.request_read_seconds) and %d that waited longest (of the address with the most "
                "waiting) while more than %d waited "
                "(server.max_pending_connections); counted since the last such message.",
                slow,
                self.seconds,
                crowded,
                self.limit,
            )
            self._closed = {"slow": 0, "crowded": 0}


def guarded_h11(limit: int, seconds: float) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol class with the two rules, sharing one `WaitingConnections` (one per server)."""
    waiting = WaitingConnections(limit, seconds)

    class GuardedH11Protocol(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._track()

        def handle_events(self) -> None:
            super().handle_events()
            self._track()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._track()

        def connection_lost(self, exc: Exception | None) -> None:
            self._stop_waiting()
            super().connection_lost(exc)

        def _track(self) -> None:
            """Start waiting when the client's side turns to sending a request; stop when it is whole, or
            while uvicorn reads no more of it (a body the application has not taken yet: not the client's
            delay; reading again, it waits afresh)."""
            receiving = (
                not self.transport.is_closing() and not self.flow.read_paused and self.conn.their_state in _RECEIVING
            )
            if receiving and self._deadline is None:
                self._deadline = self.loop.call_later(seconds, waiting.too_slow, self)
                waiting.wait(self, self._drop, self.client[0] if self.client else "")
            elif not receiving:
                self._stop_waiting()

        def _stop_waiting(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None
            waiting.done(self)

        def _drop(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None
            self.transport.close()

    GuardedH11Protocol.waiting = waiting  # type: ignore[attr-defined]  # for tests and metrics
    return GuardedH11Protocol


def more_files() -> int:
    """Raise the soft limit of open files to the hard one (a service's soft limit is often 1,024 under a
    far higher hard one); return the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (OSError, ValueError) as exc:  # above the kernel's nr_open: the soft limit stays
            log.debug("could not raise the limit of open files to %d: %s", wanted, exc)
    return soft


def file_shares(files: int, max_pending: int) -> tuple[int, int]:
    """(the listen backlog, which is also how many connections one accept round takes; how many may wait):
    a quarter of the process's files each at most. Two accept rounds can come before the rules see
    the first, so the files hold at most two rounds and the waiting ones, and a quarter for the rest."""
    quarter = max(16, files // 4)
    return min(MAX_ACCEPT_BURST, quarter), min(max_pending, quarter)


class QuietAcceptErrors(logging.Filter):
    """Keeps one of asyncio's "socket.accept() out of system resource" records a minute, with how many
    were left out; every other record passes."""

    MESSAGE = "socket.accept() out of system resource"

    def __init__(self) -> None:
        super().__init__()
        self._shown = -LOG_EVERY_SECONDS
        self._left_out = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith(self.MESSAGE):
            return True
        now = time.monotonic()
        if now - self._shown < LOG_EVERY_SECONDS:
            self._left_out += 1
            return False
        self._shown = now
        if self._left_out:
            record.msg = f"{record.msg} ({self._left_out} more left out of the log since the last one)"
            self._left_out = 0
        return True
