"""Whose chart the one renderer draws next: clients take turns, not places in one line.

The renderer draws one chart at a time, and a chart may run to `charts.render_timeout`. With one
first-come line, a client that queues its call's ten slow charts (`asyncio.gather`) would make
every other client's one-bar chart wait up to ten timeouts and give up. Here each waiting render
belongs to a party (the token's principal, else the session), and the next render is the oldest
one of the party served least recently. A ticket ranks by when its party was last served, but
never earlier than just before it joined the line (a party never served ranks as served then):
so neither new parties (anonymous sessions are one each) nor parties served long ago can jump
ahead of a ticket that was waiting before theirs joined. A chart waits for the render in progress
and at most one render of each party whose ticket joined the line before it; parties waiting
together take turns. A ticket whose caller gave up (its call was cancelled or timed out) leaves
the line instead of rendering for nobody.

Thread-safe: tickets are taken and claimed on the event loop (`claim` never blocks, so waiting
for a turn holds no thread), and the render thread gives the resource back (`leave`).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

_REMEMBERED = 4096  # parties whose last turn is remembered (a forgotten one ranks as a newcomer)


@dataclass(eq=False)
class Ticket:
    """One render waiting for its turn."""

    party: str
    number: int
    arrived: int  # the turns given before it joined the line: its party's rank if never served
    left: bool = False


class Turns:
    """A fair lock for one resource, held by one ticket at a time."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._held = False
        self._waiting: list[Ticket] = []
        self._served: OrderedDict[str, int] = OrderedDict()  # party -> the turn it was last given
        self._numbers = itertools.count()
        self._given = 0  # turns given so far

    def ticket(self, party: str) -> Ticket:
        """Join the line."""
        with self._changed:
            ticket = Ticket(party, next(self._numbers), self._given)
            self._waiting.append(ticket)
            return ticket

    def claim(self, ticket: Ticket) -> bool:
        """Hold the resource if it is `ticket`'s turn now; never waits."""
        with self._changed:
            if self._held or ticket.left or self._next() is not ticket:
                return False
            self._take(ticket)
            return True

    def enter(self, ticket: Ticket, timeout: float) -> bool:
        """Wait (blocking the thread) for `ticket`'s turn and hold the resource; False, and the
        ticket out of the line, if `timeout` passed first."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while self._held or ticket.left or self._next() is not ticket:
                left = deadline - time.monotonic()
                if ticket.left or left <= 0:
                    self._drop(ticket)
                    return False
                self._changed.wait(left)
            self._take(ticket)
            return True

    def abandon(self, ticket: Ticket) -> None:
        """The caller stopped waiting: the ticket leaves the line at once (no-op once it held)."""
        with self._changed:
            self._drop(ticket)

    def leave(self) -> None:
        """Give the resource back: the next ticket's turn."""
        with self._changed:
            self._held = False
            self._changed.notify_all()

    @property
    def held(self) -> bool:
        return self._held

    def try_enter(self) -> bool:
        """Hold the resource now if no one holds it or waits for it (the idle check)."""
        with self._changed:
            if self._held or self._waiting:
                return False
            self._held = True
            return True

    def _take(self, ticket: Ticket) -> None:
        self._held = True
        self._waiting.remove(ticket)
        self._given += 1
        self._served[ticket.party] = self._given
        self._served.move_to_end(ticket.party)
        while len(self._served) > _REMEMBERED:
            self._served.popitem(last=False)
        self._changed.notify_all()

    def _drop(self, ticket: Ticket) -> None:
        ticket.left = True
        if ticket in self._waiting:
            self._waiting.remove(ticket)
        self._changed.notify_all()

    def _next(self) -> Ticket | None:
        return min(self._waiting, key=self._rank, default=None)

    def _rank(self, ticket: Ticket) -> tuple[int, int]:
        return max(self._served.get(ticket.party, ticket.arrived), ticket.arrived - 1), ticket.number
