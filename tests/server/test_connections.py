"""Connections waiting for their request (server/connections.py): the longest waiting one goes when
more than the limit wait, a slow one goes at its deadline, and closing them is logged once per period."""

from __future__ import annotations

import logging
import resource

import pytest

from mcp_analysis.server import connections
from mcp_analysis.server.connections import WaitingConnections


class Connection:
    def __init__(self, name: str, closed: list[str]) -> None:
        self.name, self.closed = name, closed

    def close(self) -> None:
        self.closed.append(self.name)


def test_beyond_the_limit_the_longest_waiting_connection_is_closed() -> None:
    closed: list[str] = []
    waiting = WaitingConnections(limit=2, seconds=30)
    a, b, c, d = (Connection(n, closed) for n in "abcd")
    waiting.wait(a, a.close)
    waiting.wait(b, b.close)
    waiting.done(a)  # its request arrived whole: no longer waiting
    waiting.wait(c, c.close)
    assert closed == [] and len(waiting) == 2
    waiting.wait(d, d.close)
    assert closed == ["b"] and len(waiting) == 2


def test_a_flood_from_one_address_pushes_out_its_own_connections_first() -> None:
    closed: list[str] = []
    waiting = WaitingConnections(limit=3, seconds=30)
    mine = Connection("mine", closed)
    waiting.wait(mine, mine.close, "10.0.0.7")  # waiting longest of all
    for i in range(20):
        flood = Connection(f"flood{i}", closed)
        waiting.wait(flood, flood.close, "10.0.0.66")
    assert closed == [f"flood{i}" for i in range(18)] and len(waiting) == 3
    other = Connection("other", closed)
    waiting.wait(other, other.close, "10.0.0.8")
    assert closed[-1] == "flood18"  # still the flooding address's oldest, not the oldest of all
    waiting.done(mine)
    waiting.too_slow(mine)
    assert "mine" not in closed


def test_a_connection_whose_request_is_arriving_goes_after_its_clients_idle_ones() -> None:
    closed: list[str] = []
    waiting = WaitingConnections(limit=2, seconds=30)
    upload, idle = Connection("upload", closed), Connection("idle", closed)
    waiting.wait(upload, upload.close, "10.0.0.7")
    waiting.wait(idle, idle.close, "10.0.0.7")
    waiting.active(upload)  # part of its body arrived
    late = Connection("late", closed)
    waiting.wait(late, late.close, "10.0.0.7")
    assert closed == ["idle"]


def test_beyond_the_open_limit_room_is_made_from_the_waiting_then_from_the_busiest_address() -> None:
    closed: list[str] = []
    waiting = WaitingConnections(limit=10, seconds=30, total=3)
    flood = [Connection(f"flood{i}", closed) for i in range(3)]
    for c in flood:  # three being served, none waiting on its client
        assert waiting.opened(c, c.close, "10.0.0.66")
    mine = Connection("mine", closed)
    assert waiting.opened(mine, mine.close, "10.0.0.7") and closed == ["flood0"]  # the busiest address's oldest
    waiting.closed(flood[0])
    again = Connection("again", closed)
    assert waiting.opened(again, again.close, "10.0.0.66") is False  # its own address is the busiest
    assert closed == ["flood0"] and waiting.open == 3
    waiting.wait(flood[2], flood[2].close, "10.0.0.66")  # now leaves its answers unread
    late = Connection("late", closed)
    assert waiting.opened(late, late.close, "10.0.0.7") and closed[-1] == "flood2"  # the waiting one first


def test_a_slow_connection_is_closed_once_and_a_finished_one_never() -> None:
    closed: list[str] = []
    waiting = WaitingConnections(limit=10, seconds=30)
    slow, quick = Connection("slow", closed), Connection("quick", closed)
    waiting.wait(slow, slow.close)
    waiting.wait(quick, quick.close)
    waiting.done(quick)
    waiting.too_slow(quick)  # its deadline fired after its request arrived: nothing to do
    waiting.too_slow(slow)
    waiting.too_slow(slow)
    assert closed == ["slow"] and len(waiting) == 0


def test_closing_is_logged_once_per_period_with_counts(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = [1000.0]
    monkeypatch.setattr(connections.time, "monotonic", lambda: clock[0])
    waiting = WaitingConnections(limit=1, seconds=30)
    closed: list[str] = []
    with caplog.at_level(logging.WARNING, logger="mcp_analysis.server.connections"):
        for i in range(500):  # a flood of idle connections
            waiting.wait(Connection(str(i), closed), lambda: closed.append("x"))
        clock[0] += connections.LOG_EVERY_SECONDS
        waiting.wait(Connection("late", closed), lambda: None)
    assert len(closed) == 500  # each beyond the first pushed out the one before it
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2
    assert ", 1 idle longest (of the address with the most waiting) while more than 1 waited" in messages[0]
    assert ", 499 idle longest" in messages[1]  # the rest, counted since the first message


def test_the_soft_limit_of_open_files_is_raised_to_the_hard_one() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    lower = min(soft, 256)
    resource.setrlimit(resource.RLIMIT_NOFILE, (lower, hard))
    try:
        raised = connections.more_files()
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == raised
        assert raised > lower and (raised == hard or hard == resource.RLIM_INFINITY)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_an_accept_round_takes_an_eighth_of_the_files_the_waiting_a_quarter_all_half() -> None:
    shares = [connections.file_shares(files, 256) for files in (20, 1024, 4096, 1 << 20)]
    assert shares == [(16, 16, 32), (128, 256, 512), (512, 256, 2048), (2048, 256, 1 << 19)]


def test_refused_accepts_are_logged_once_a_minute_with_a_count(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [5000.0]
    monkeypatch.setattr(connections.time, "monotonic", lambda: clock[0])
    quiet = connections.QuietAcceptErrors()

    def record(msg: str) -> logging.LogRecord:
        return logging.LogRecord("asyncio", logging.ERROR, __file__, 1, msg, None, None)

    refused = "socket.accept() out of system resource\nsocket: <fd=6>"
    kept = [quiet.filter(record(refused)) for _ in range(2048)]
    assert kept.count(True) == 1 and kept[0]
    assert quiet.filter(record("Task exception was never retrieved"))  # other records all pass
    clock[0] += connections.LOG_EVERY_SECONDS
    later = record(refused)
    assert quiet.filter(later) and "(2047 more left out of the log since the last one)" in later.getMessage()
