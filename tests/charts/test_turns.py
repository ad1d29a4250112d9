"""The renderer's line (charts/turns.py): parties take turns, newcomers do not jump ahead, a
cancelled waiter leaves, a blocking wait is bounded."""

from __future__ import annotations

import threading
import time

from mcp_analysis.charts.turns import Ticket, Turns


def served_in_order(turns: Turns, tickets: list[Ticket]) -> list[Ticket]:
    """Give the resource back and let the waiting tickets claim it until none is left: the order
    they got it in. Exactly one ticket may claim each free turn."""
    order: list[Ticket] = []
    left = list(tickets)
    turns.leave()
    while left:
        claimed = [t for t in left if turns.claim(t)]
        assert len(claimed) == 1, claimed
        order.append(claimed[0])
        left.remove(claimed[0])
        turns.leave()
    return order


def test_a_party_arriving_late_goes_before_a_party_that_queued_many() -> None:
    turns = Turns()
    assert turns.claim(turns.ticket("a"))  # a renders now; its other charts queue behind
    queued = [turns.ticket("a") for _ in range(4)]
    late = turns.ticket("b")
    order = served_in_order(turns, [late, *queued])
    # a had waited before b came, so one of its renders goes first; then b, then the rest of a's.
    assert order == [queued[0], late, *queued[1:]]


def test_parties_alternate_while_both_wait() -> None:
    turns = Turns()
    assert turns.claim(turns.ticket("x"))
    tickets = [turns.ticket(p) for p in ("a", "a", "a", "b", "b", "b")]
    order = served_in_order(turns, tickets)
    assert [t.party for t in order] == list("ababab")


def test_new_parties_never_jump_ahead_of_a_party_served_before_they_came() -> None:
    """Anonymous sessions are a party each: a stream of them, each with one slow chart, must not
    keep a client that drew a chart earlier waiting (eighth hostile round)."""
    turns = Turns()
    victim = turns.ticket("victim")
    assert turns.claim(victim)
    turns.leave()
    assert turns.claim(turns.ticket("anon-0"))  # renders now
    newcomers = [turns.ticket(f"anon-{n}") for n in range(1, 8)]
    again = turns.ticket("victim")
    order = served_in_order(turns, [*newcomers, again])
    assert order[0] is again, [t.party for t in order]  # served before they came: first
    assert order[1:] == newcomers  # newcomers among themselves: first come, first served


def test_an_abandoned_ticket_leaves_the_line_and_is_never_served() -> None:
    turns = Turns()
    assert turns.claim(turns.ticket("a"))
    gone, stays = turns.ticket("a"), turns.ticket("a")
    turns.abandon(gone)
    assert not turns.claim(gone)
    assert served_in_order(turns, [stays]) == [stays]
    assert not turns.claim(gone)  # not even when the resource is free


def test_a_blocking_wait_gives_up_at_its_timeout_and_leaves_the_line() -> None:
    turns = Turns()
    assert turns.claim(turns.ticket("a"))
    started = time.monotonic()
    waiting = turns.ticket("b")
    assert not turns.enter(waiting, 0.2)
    assert 0.15 <= time.monotonic() - started < 3
    assert not turns.try_enter()  # still held by a
    turns.leave()
    assert not turns.claim(waiting)  # it left the line when it gave up
    assert turns.try_enter()  # free and no one waiting: the idle check may take it
    turns.leave()


def test_a_blocking_wait_gets_its_turn_when_the_holder_leaves() -> None:
    turns = Turns()
    assert turns.claim(turns.ticket("a"))
    ticket = turns.ticket("b")
    got: list[bool] = []
    thread = threading.Thread(target=lambda: got.append(turns.enter(ticket, 5)))
    thread.start()
    time.sleep(0.1)
    assert got == []
    turns.leave()
    thread.join(5)
    assert got == [True]
    assert not turns.try_enter()  # b holds it now


def test_parties_served_long_ago_never_jump_ahead_of_a_ticket_waiting_before_theirs() -> None:
    """Twenty anonymous sessions that each drew a cheap chart earlier, then queue slow ones after
    the client's chart joined the line: the client's goes first."""
    turns = Turns()
    for n in range(20):  # the warm-up: each served once, long before
        assert turns.claim(turns.ticket(f"anon-{n}"))
        turns.leave()
    assert turns.claim(turns.ticket("client"))
    turns.leave()
    assert turns.claim(turns.ticket("other"))  # renders now
    waiting = turns.ticket("client")
    later = [turns.ticket(f"anon-{n}") for n in range(20)]
    order = served_in_order(turns, [*later, waiting])
    assert order[0] is waiting, [t.party for t in order]
