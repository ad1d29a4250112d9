"""The renderer's line (charts/turns.py): parties take turns, a cancelled waiter leaves, waits are bounded."""

from __future__ import annotations

import threading
import time

from mcp_analysis.charts.turns import Ticket, Turns


def _wait_for(turns: Turns, ticket: Ticket, order: list[str], timeout: float = 5.0) -> threading.Thread:
    def run() -> None:
        if turns.enter(ticket, timeout):
            order.append(f"{ticket.party}{ticket.number}")
            turns.leave()
        else:
            order.append(f"gave up {ticket.party}{ticket.number}")

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _queued(turns: Turns, count: int) -> None:
    deadline = time.monotonic() + 5
    while len(turns._waiting) < count and time.monotonic() < deadline:
        time.sleep(0.005)
    assert len(turns._waiting) == count


def test_a_party_arriving_late_goes_before_a_party_that_queued_many() -> None:
    turns, order = Turns(), []
    holder = turns.ticket("a")
    assert turns.enter(holder, 1)  # a renders now; its other charts queue behind
    threads = [_wait_for(turns, turns.ticket("a"), order) for _ in range(4)]
    _queued(turns, 4)
    late = turns.ticket("b")
    threads.append(_wait_for(turns, late, order))
    _queued(turns, 5)
    turns.leave()
    for thread in threads:
        thread.join(5)
    assert order[0] == f"b{late.number}", order  # b never served: next, before a's queued four
    assert [o for o in order if o.startswith("a")] == sorted(o for o in order if o.startswith("a"))  # a's in order


def test_parties_alternate_while_both_wait() -> None:
    turns, order = Turns(), []
    assert turns.enter(turns.ticket("x"), 1)
    threads = [_wait_for(turns, turns.ticket(p), order) for p in ("a", "a", "a", "b", "b", "b")]
    _queued(turns, 6)
    turns.leave()
    for thread in threads:
        thread.join(5)
    assert [o[0] for o in order] in (list("ababab"), list("bababa")), order


def test_an_abandoned_ticket_leaves_the_line_and_is_never_served() -> None:
    turns, order = Turns(), []
    assert turns.enter(turns.ticket("a"), 1)
    gone = turns.ticket("a")
    threads = [_wait_for(turns, gone, order), _wait_for(turns, turns.ticket("a"), order)]
    _queued(turns, 2)
    turns.abandon(gone)
    threads[0].join(5)
    assert order == [f"gave up a{gone.number}"]  # it left at once, while the resource was still held
    _queued(turns, 1)
    turns.leave()
    threads[1].join(5)
    assert order[-1] == f"a{gone.number + 1}"


def test_a_wait_past_its_timeout_gives_up_and_frees_its_place() -> None:
    turns = Turns()
    assert turns.enter(turns.ticket("a"), 1)
    started = time.monotonic()
    assert not turns.enter(turns.ticket("b"), 0.2)
    assert 0.15 <= time.monotonic() - started < 3
    assert turns._waiting == []
    assert not turns.try_enter()  # still held by a
    turns.leave()
    assert turns.try_enter()  # free and no one waiting: the idle check may take it
    turns.leave()
