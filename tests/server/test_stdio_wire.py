"""The stdio wire polled from the event loop: real pipes and socketpairs, no threads.

Each end is opened as the server opens its stdin and stdout: a pipe through /proc (a
description of our own, so the flag never reaches the client's end), a socket with
MSG_DONTWAIT. What is checked is what the SDK's threaded file gave: lines cut at the
limit, the last line without a newline, EOF, and a writer that waits for a full pipe
without blocking the loop.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import socket
import subprocess
import sys
import threading
import time
import tty
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_analysis.server.stdio_wire import Endpoint, LineReader, MessageWriter, open_endpoint
from tests.conftest import REPO

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(sys.platform != "linux", reason="the polled wire reopens pipes through /proc (Linux)"),
]


class Wire:
    """A fresh pipe or stream socketpair, blocking as a client hands them over."""

    def __init__(self, kind: str) -> None:
        if kind == "pipe":
            self.read_fd, self.write_fd = os.pipe()
        else:
            a, b = socket.socketpair()
            self.read_fd, self.write_fd = a.detach(), b.detach()
        self._open = {self.read_fd, self.write_fd}

    def close_writer(self) -> None:
        """The client's writing end goes (with our own endpoints closed, the reader sees EOF)."""
        self._open.discard(self.write_fd)
        os.close(self.write_fd)

    def close(self) -> None:
        for fd in self._open:  # never one closed already: its number may have been reused
            os.close(fd)


@pytest.fixture(params=["pipe", "socket"])
def wire(request: pytest.FixtureRequest) -> Iterator[Wire]:
    opened = Wire(request.param)
    yield opened
    opened.close()


def _end(fd: int, *, writing: bool) -> Endpoint:
    end = open_endpoint(fd, writing=writing)
    assert end is not None
    return end


async def test_lines_are_read_whole_cut_at_the_limit_and_ended_by_eof(wire: Wire) -> None:
    read_fd, write_fd = wire.read_fd, wire.write_fd
    end = _end(read_fd, writing=False)
    reader = LineReader(end)
    os.write(write_fd, b'{"a":1}\n' + b"x" * 50 + b"\nlast without newline")
    assert await reader.readline(1000) == b'{"a":1}\n'
    assert await reader.readline(20) == b"x" * 20  # too long: the first `limit` bytes, as file.readline
    assert await reader.readline(1000) == b"x" * 30 + b"\n"
    wire.close_writer()
    assert await reader.readline(1000) == b"last without newline"
    assert await reader.readline(1000) == b""
    end.close()


async def test_a_line_arriving_in_pieces_waits_for_its_end(wire: Wire) -> None:
    read_fd, write_fd = wire.read_fd, wire.write_fd
    end = _end(read_fd, writing=False)
    reader = LineReader(end)
    got: list[bytes] = []

    async def read() -> None:
        got.append(await reader.readline(1000))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(read)
            for piece in (b'{"jsonrpc":', b'"2.0",', b'"id":1}\n'):
                await anyio.sleep(0.05)
                assert not got  # the loop kept running while the reader waited
                os.write(write_fd, piece)
    assert got == [b'{"jsonrpc":"2.0","id":1}\n']
    end.close()


async def test_a_line_longer_than_a_read_spans_reads_and_the_limit_is_exact(wire: Wire) -> None:
    read_fd, write_fd = wire.read_fd, wire.write_fd
    end = _end(read_fd, writing=False)
    reader = LineReader(end)
    long_line = b"a" * 700_000 + b"\n"  # about three of the reader's 256 KB reads

    def feed() -> None:
        os.write(write_fd, long_line)
        os.write(write_fd, b"b" * 9 + b"\n" + b"c" * 10 + b"\n")
        wire.close_writer()

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.to_thread.run_sync, feed)
            assert await reader.readline(1_000_000) == long_line
            assert await reader.readline(10) == b"b" * 9 + b"\n"  # the newline is the limit-th byte
            assert await reader.readline(10) == b"c" * 10  # the newline would be the 11th
            assert await reader.readline(10) == b"\n"
            assert await reader.readline(10) == b""
    end.close()


async def test_a_flood_of_blank_lines_does_not_starve_the_loop(wire: Wire) -> None:
    """Blank lines are skipped without a reply; data that is always there must still let the
    event loop run everything else between lines."""
    from mcp_analysis.server.stdio import ScreenedLines

    read_fd, write_fd = wire.read_fd, wire.write_fd
    end = _end(read_fd, writing=False)
    lines = ScreenedLines(os.fdopen(read_fd, "rb", closefd=False), LineReader(end))
    ticks = 0

    def pour() -> None:
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            os.write(write_fd, b"\n" * 65536)
        os.write(write_fd, b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n')

    async def tick() -> None:
        nonlocal ticks
        while True:
            await anyio.sleep(0.01)
            ticks += 1

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(tick)
            tg.start_soon(anyio.to_thread.run_sync, pour)
            assert await lines.__anext__() == '{"jsonrpc":"2.0","id":1,"method":"ping"}\n'
            tg.cancel_scope.cancel()
    assert ticks >= 30  # ~150 ticks in 1.5 s when the loop is free; a starved loop gives ~0
    end.close()


async def test_the_clients_end_stays_blocking(wire: Wire) -> None:
    """The non-blocking flag is ours alone: the descriptors we were given keep their mode."""
    read_fd, write_fd = wire.read_fd, wire.write_fd
    ends = [_end(read_fd, writing=False), _end(write_fd, writing=True)]
    for fd in (read_fd, write_fd):
        assert not fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_NONBLOCK
    for end in ends:
        end.close()


def test_a_process_wide_socket_timeout_changes_nothing() -> None:
    """socket.setdefaulttimeout() would make a new socket object non-blocking on the shared
    description and its recv wait: neither may happen to the client's socket."""
    client, ours = socket.socketpair()
    before = socket.getdefaulttimeout()
    socket.setdefaulttimeout(2)
    try:
        end = _end(ours.fileno(), writing=False)
        assert not fcntl.fcntl(ours.fileno(), fcntl.F_GETFL) & os.O_NONBLOCK
        started = time.monotonic()
        with pytest.raises(BlockingIOError):
            end.recv(10)
        assert time.monotonic() - started < 1
        client.sendall(b"x\n")
        assert end.recv(10) == b"x\n"
        end.close()
    finally:
        socket.setdefaulttimeout(before)
        client.close()
        ours.close()


async def test_a_full_wire_parks_the_writer_not_the_loop(wire: Wire) -> None:
    read_fd, write_fd = wire.read_fd, wire.write_fd
    ours = _end(write_fd, writing=True)
    writer = MessageWriter(ours)
    message = "y" * (4 * 1024 * 1024)  # far more than a pipe or socket buffer holds
    ticks = 0
    received = bytearray()

    async def tick() -> None:
        nonlocal ticks
        while True:
            await anyio.sleep(0.01)
            ticks += 1

    async with anyio.create_task_group() as tg:
        tg.start_soon(tick)
        with anyio.fail_after(30):
            async with anyio.create_task_group() as io:

                async def write() -> None:
                    await writer.write(message + "\n")
                    await writer.flush()

                io.start_soon(write)
                await anyio.sleep(0.3)  # nobody reads yet: the writer must be waiting
                parked_ticks = ticks
                assert parked_ticks >= 5
                reader = _end(read_fd, writing=False)
                while len(received) < len(message) + 1:
                    try:
                        received += reader.recv(1 << 20)
                    except BlockingIOError:
                        await anyio.sleep(0.001)
                reader.close()
        tg.cancel_scope.cancel()
    ours.close()
    assert bytes(received) == (message + "\n").encode()


async def test_a_cancelled_flush_keeps_the_rest_of_its_message(wire: Wire) -> None:
    read_fd, write_fd = wire.read_fd, wire.write_fd
    writer = MessageWriter(_end(write_fd, writing=True))
    first, second = "x" * (2 * 1024 * 1024), '{"jsonrpc":"2.0","id":2,"result":{}}'
    await writer.write(first + "\n")
    with anyio.move_on_after(0.2) as waited:  # nobody reads: the flush waits, and is cancelled
        await writer.flush()
    assert waited.cancelled_caught
    received = bytearray()
    reader = _end(read_fd, writing=False)

    async def drain() -> None:
        while True:
            try:
                chunk = reader.recv(1 << 20)
            except BlockingIOError:
                await anyio.wait_readable(reader.fd)
                continue
            if not chunk:
                return
            received.extend(chunk)

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(drain)
            await writer.write(second + "\n")
            await writer.flush()
            wire.close_writer()  # EOF for the drain (our endpoint is a description of its own)
            writer._end.close()
    reader.close()
    assert bytes(received) == f"{first}\n{second}\n".encode()


async def test_a_socket_whose_peer_stops_reading_fails_the_write_as_a_closed_pipe() -> None:
    """A peer that shuts its reading side is never reported writable: the write must still end
    (with EPIPE, as a blocking write did), not wait forever while requests pile up."""
    ours, client = socket.socketpair()
    end = _end(ours.fileno(), writing=True)
    writer = MessageWriter(end)
    await writer.write("z" * (4 * 1024 * 1024) + "\n")

    def stop_reading() -> None:
        client.recv(1000)
        client.shutdown(socket.SHUT_RD)

    stopper = threading.Timer(0.3, stop_reading)
    stopper.start()
    try:
        with anyio.fail_after(20), pytest.raises(BrokenPipeError):
            await writer.flush()
    finally:
        stopper.join()
        end.close()
        ours.close()
        client.close()


def test_anything_but_a_pipe_or_stream_socket_keeps_the_threaded_path(tmp_path: Path) -> None:
    fd = os.open(tmp_path / "file", os.O_RDWR | os.O_CREAT)
    datagram, other = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    open_before = set(Path("/proc/self/fd").iterdir())
    try:
        assert open_endpoint(fd, writing=False) is None
        assert open_endpoint(datagram.fileno(), writing=True) is None
        assert set(Path("/proc/self/fd").iterdir()) == open_before  # nothing kept open, nothing closed
        os.fstat(datagram.fileno())
    finally:
        os.close(fd)
        datagram.close()
        other.close()


CLAIM = """
import os, anyio
from mcp_analysis.server.stdio import _claimed_stdout
with _claimed_stdout() as writer:
    assert writer is not None, "a pipe on fd 1 must get the polled writer"
    os.write(1, b"stray write\\n")
    print("stray print", flush=True)
    async def send():
        await writer.write('{"jsonrpc":"2.0","id":1,"result":{}}\\n')
        await writer.flush()
    anyio.run(send)
print("after serving", flush=True)
"""


def test_while_serving_fd_1_points_at_stderr_and_only_messages_reach_the_wire() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CLAIM], cwd=REPO, capture_output=True, timeout=60, stdin=subprocess.DEVNULL
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout == b'{"jsonrpc":"2.0","id":1,"result":{}}\nafter serving\n'
    assert b"stray write" in done.stderr and b"stray print" in done.stderr


def test_a_terminal_and_a_file_keep_the_threaded_path(sample_db: Path, tmp_path: Path) -> None:
    """stdin a terminal, stdout a regular file: neither can be polled, and both are still served."""
    master, terminal = pty.openpty()
    tty.setraw(terminal)  # no echo, no line editing: bytes pass as a pipe's would
    replies = tmp_path / "replies.jsonl"
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data")}
    with replies.open("wb") as stdout:
        server = subprocess.Popen(
            [sys.executable, "-m", "mcp_analysis", "--db", str(sample_db), "serve"],
            cwd=REPO,
            stdin=terminal,
            stdout=stdout,
            stderr=subprocess.DEVNULL,
            env=env,
        )
    os.close(terminal)
    try:
        os.write(
            master,
            b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
            b'"capabilities":{},"clientInfo":{"name":"tty","version":"0"}}}\n'
            b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
            b'{"jsonrpc":"2.0","id":2,"method":"tools/list"}\n',
        )
        deadline = time.monotonic() + 90
        answers: dict[int, Any] = {}
        while len(answers) < 2 and time.monotonic() < deadline and server.poll() is None:
            time.sleep(0.1)
            answers = {m["id"]: m for m in map(json.loads, replies.read_text().splitlines())}
        assert answers[1]["result"]["serverInfo"]["name"] == "mcp-analysis"
        assert {t["name"] for t in answers[2]["result"]["tools"]} >= {
            "search",
            "execute_code",
            "cite",
            "list_documents",
        }
    finally:
        server.kill()
        server.wait()
        os.close(master)
