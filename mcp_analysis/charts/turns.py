"""Whose chart the one renderer draws next: clients take turns, not places in one line.

The renderer draws one chart at a time, and a chart may run to `charts.render_timeout`. With one
first-come line, a client that queues its call's ten slow charts (`asyncio.gather`) would make
every other client's one-bar chart wait up to ten timeouts and give up. Here each waiting render
belongs to a party (the token's principal, else the session): the next render is the oldest one
of the party served least recently, so another client waits for the render in progress and at
most one render of each other waiting party. A waiter whose call was cancelled (its code timed
out) leaves the line instead of rendering for nobody.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field

_REMEMBERED = 4096  # parties whose last turn is remembered (a forgotten one counts as never served)


@dataclass(eq=False)
class Ticket:
    """One render waiting for its turn."""

    party: str
    number: int
    abandoned: threading.Event = field(default_factory=threading.Event)


class Turns:
    """A fair lock for one resource, held by one ticket at a time (blocking: call from threads)."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._held = False
        self._waiting: list[Ticket] = []
        self._served: OrderedDict[str, int] = OrderedDict()  # party -> the number of its last turn
        self._numbers = itertools.count()
        self._turns = itertools.count(1)

    def ticket(self, party: str) -> Ticket:
        return Ticket(party, next(self._numbers))

    def enter(self, ticket: Ticket, timeout: float) -> bool:
        """Wait for `ticket`'s turn and hold the resource: False if `timeout` passed first or the
        ticket was abandoned (then it has left the line)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            self._waiting.append(ticket)
            try:
                while self._held or self._next() is not ticket:
                    left = deadline - time.monotonic()
                    if ticket.abandoned.is_set() or left <= 0:
                        return False
                    self._changed.wait(left)
                if ticket.abandoned.is_set():
                    return False
                self._held = True
                self._served[ticket.party] = next(self._turns)
                self._served.move_to_end(ticket.party)
                while len(self._served) > _REMEMBERED:
                    self._served.popitem(last=False)
                return True
            finally:
                self._waiting.remove(ticket)
                self._changed.notify_all()  # the line changed: another ticket may be next now

    def leave(self) -> None:
        with self._changed:
            self._held = False
            self._changed.notify_all()

    def abandon(self, ticket: Ticket) -> None:
        """The caller stopped waiting (cancelled): the ticket leaves the line at once."""
        with self._changed:
            ticket.abandoned.set()
            self._changed.notify_all()

    def try_enter(self) -> bool:
        """Hold the resource now if no one holds it or waits for it (the idle check)."""
        with self._changed:
            if self._held or self._waiting:
                return False
            self._held = True
            return True

    def _next(self) -> Ticket | None:
        live = [t for t in self._waiting if not t.abandoned.is_set()]
        return min(live, key=lambda t: (self._served.get(t.party, 0), t.number), default=None)
