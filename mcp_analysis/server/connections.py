"""HTTP connections that stall are closed: no client may hold the server's files.

uvicorn keeps a connection that sent half a request line for as long as the client likes (its
keep-alive timeout applies only between requests, and any byte arriving cancels it), and one whose
client never reads the answers to its pipelined requests, so a client without a token could open
connections until the process has no file left to accept another (1,024 under the usual soft
limit) and nobody else is served. Two rules, on uvicorn's h11 protocol class (its internals are
fenced in this module, as the SDK's are in sdk_compat.py):

- a connection waits on its client while its request is not whole (from the connection's opening
  or the previous response) or while the client leaves what it is sent unread; after
  `server.client_stall_seconds` of that it is closed;
- at most `server.max_pending_connections` connections may wait on their clients at once; one more
  closes, of the client address with the most waiting, the one idle longest (a request arriving
  makes it the last). A flood of idle connections from one address pushes out its own; a client
  sending its request when it connects (as HTTP clients do) outlasts a round or two of a flood,
  and an upload in progress outlasts connections that send nothing.

Closed connections are counted and logged at most once per `LOG_EVERY_SECONDS`: a flood must not
flood the log too. The rules act once a connection is accepted; so that a burst of connections
cannot use up the process's files before they act, the soft limit of open files is raised to the
hard one at start (`more_files`); one accept round takes an eighth of it, the waiting connections a
quarter, and all connections half (`file_shares`: asyncio accepts a second round before the first
round's connections reach the protocol). Beyond half, a new connection closes one waiting on its
client; when none waits, the oldest of the address holding most, or itself when that address is its
own. Should the files run out all the same, asyncio logs each refused accept with a traceback (up to
2,048 a second); `QuietAcceptErrors` keeps one a minute, counted.
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


class _ByAddress:
    """Connections grouped by their client's address, each group oldest (or idlest) first, with how
    to close each."""

    def __init__(self) -> None:
        self._address: dict[object, str] = {}
        self._groups: dict[str, OrderedDict[object, Callable[[], None]]] = {}

    def __len__(self) -> int:
        return len(self._address)

    def add(self, connection: object, close: Callable[[], None], address: str) -> None:
        self._address[connection] = address
        self._groups.setdefault(address, OrderedDict())[connection] = close

    def pop(self, connection: object) -> Callable[[], None] | None:
        """Take `connection` out; how to close it, or None when it was not in."""
        address = self._address.pop(connection, None)
        if address is None:
            return None
        group = self._groups[address]
        close = group.pop(connection)
        if not group:
            del self._groups[address]
        return close

    def to_end(self, connection: object) -> None:
        """`connection` goes last in its group."""
        address = self._address.get(connection)
        if address is not None:
            self._groups[address].move_to_end(connection)

    def first_of_busiest(self) -> tuple[object, str]:
        """The first connection of the address with the most (the first such address on a tie), and that address."""
        address, group = max(self._groups.items(), key=lambda item: len(item[1]))
        return next(iter(group)), address


class WaitingConnections:
    """The open connections, and those waiting on their clients, by client address, with the rules' bounds."""

    def __init__(self, limit: int, seconds: float, total: int | None = None) -> None:
        self.limit = limit
        self.seconds = seconds
        self.total = total if total is not None else 2 * limit  # connections open at once, waiting or not
        self._open = _ByAddress()  # oldest first
        self._waiting = _ByAddress()  # idlest first
        self._closed = {"slow": 0, "crowded": 0, "full": 0}
        self._logged = 0.0

    def __len__(self) -> int:
        return len(self._waiting)

    @property
    def open(self) -> int:
        return len(self._open)

    def opened(self, connection: object, close: Callable[[], None], client: str = "") -> bool:
        """`connection` from `client` was accepted. Beyond `total` open, room is made: a connection waiting
        on its client goes first (see `wait`), else the oldest of the address with the most open; False
        when that address is this one's own (the new connection is to be closed)."""
        self._open.add(connection, close, client)
        if len(self._open) <= self.total:
            return True
        if self._waiting:
            self._close_idlest("crowded")
            return True
        oldest, busiest = self._open.first_of_busiest()
        if busiest == client:
            self.closed(connection)
            self._closed["full"] += 1
            self._report()
            return False
        drop = self._open.pop(oldest)  # none waits (above), so it is only open
        if drop is not None:
            self._close(drop, "full")
        return True

    def closed(self, connection: object) -> None:
        """`connection` ended (it is no longer open, nor waiting)."""
        self._waiting.pop(connection)
        self._open.pop(connection)

    def wait(self, connection: object, close: Callable[[], None], client: str = "") -> None:
        """`connection` (from the address `client`) begins to wait on its client; `close` ends it. Beyond
        the limit, of the client address with the most waiting, the one idle longest is closed: a flood
        from one address pushes out its own, and a legitimate client's connection waits a round trip at most."""
        self._waiting.add(connection, close, client)
        while len(self._waiting) > self.limit:
            self._close_idlest("crowded")

    def _close_idlest(self, why: str) -> None:
        idlest, _ = self._waiting.first_of_busiest()
        close = self._waiting.pop(idlest)
        if close is not None:
            self._close(close, why)

    def active(self, connection: object) -> None:
        """`connection` received part of its request: it goes after its client's idle ones."""
        self._waiting.to_end(connection)

    def done(self, connection: object) -> None:
        """`connection`'s request arrived whole, or it closed."""
        self._waiting.pop(connection)

    def too_slow(self, connection: object) -> None:
        """`connection`'s request did not arrive within `seconds`."""
        close = self._waiting.pop(connection)
        if close is not None:
            self._close(close, "slow")

    def _close(self, close: Callable[[], None], why: str) -> None:
        close()
        self._closed[why] += 1
        self._report()

    def _report(self) -> None:
        now = time.monotonic()
        if now - self._logged < LOG_EVERY_SECONDS:
            return
        self._logged = now
        log.warning(
            "Closed %d HTTP connection(s) whose client stalled (its request not whole, or what it was sent "
            "left unread) for %g s (server.client_stall_seconds), %d idle longest (of the address with the "
            "most waiting) while more than %d waited (server.max_pending_connections) or %d were open, and "
            "%d of the address with the most open while %d were open and none waited; counted since the "
            "last such message.",
            self._closed["slow"],
            self.seconds,
            self._closed["crowded"],
            self.limit,
            self.total,
            self._closed["full"],
            self.total,
        )
        self._closed = {"slow": 0, "crowded": 0, "full": 0}


def guarded_h11(limit: int, seconds: float, total: int | None = None) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol class with the rules, sharing one `WaitingConnections` (one per server)."""
    waiting = WaitingConnections(limit, seconds, total)

    class GuardedH11Protocol(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None

        @property
        def _address(self) -> str:
            return self.client[0] if self.client else ""

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if not waiting.opened(self, self._drop, self._address):
                transport.close()  # the server is full, most of it this client's own connections
            self._track()

        def handle_events(self) -> None:
            super().handle_events()
            self._track()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._track()

        def connection_lost(self, exc: Exception | None) -> None:
            self._stop_waiting()
            waiting.closed(self)
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self._deadline is not None:  # a request arriving: of its client's, the last to be closed
                waiting.active(self)

        def pause_writing(self) -> None:
            super().pause_writing()
            self._track()

        def resume_writing(self) -> None:
            super().resume_writing()
            self._track()

        def _track(self) -> None:
            """Wait on the client while its request is not whole (unless uvicorn reads no more of it: a
            body the application has not taken yet is not the client's delay) or while it leaves what
            it is sent unread (pipelined requests whose answers it never reads); stop when neither."""
            stalled = not self.transport.is_closing() and (
                self.flow.write_paused or (not self.flow.read_paused and self.conn.their_state in _RECEIVING)
            )
            if stalled and self._deadline is None:
                self._deadline = self.loop.call_later(seconds, waiting.too_slow, self)
                waiting.wait(self, self._drop, self._address)
            elif not stalled:
                self._stop_waiting()

        def _stop_waiting(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None
            waiting.done(self)

        def _drop(self) -> None:
            self._stop_waiting()
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


def file_shares(files: int, max_pending: int) -> tuple[int, int, int]:
    """(the listen backlog, which is also how many connections one accept round takes; how many may wait;
    how many may be open): an eighth, a quarter and a half of the process's files at most. Two accept
    rounds can come before the rules see the first, so connections hold at most three quarters of the
    files, the rest left for the knowledge base and the workers; and a client's connection accepted
    among a flood outlasts a round or two of it, time for its request."""
    return (
        min(MAX_ACCEPT_BURST, max(16, files // 8)),
        min(max_pending, max(16, files // 4)),
        max(32, files // 2),
    )


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
