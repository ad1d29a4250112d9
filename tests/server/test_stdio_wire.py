"""The stdio wire polled from the event loop: real pipes and socketpairs, no threads.

Each end is opened as the server opens its stdin and stdout: a pipe through /proc (a
description of our own, so the flag never reaches the client's end), a socket with
MSG_DONTWAIT. What is checked is what the SDK's threaded file gave: lines cut at the
limit, the last line without a newline, EOF, and a writer that waits for a full pipe
without blocking the loop.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from mcp_analysis.server.stdio_wire import Endpoint, LineReader, MessageWriter, open_endpoint
from tests.conftest import REPO

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(sys.platform != "linux", reason="the polled wire reopens pipes through /proc (Linux)"),
]


@pytest.fixture(params=["pipe", "socket"])
def wire(request: pytest.FixtureRequest) -> Iterator[tuple[int, int]]:
    """(read fd, write fd) of a fresh pipe or stream socketpair, blocking as a client hands them over."""
    if request.param == "pipe":
        read_fd, write_fd = os.pipe()
    else:
        a, b = socket.socketpair()
        read_fd, write_fd = a.detach(), b.detach()
    yield read_fd, write_fd
    for fd in (read_fd, write_fd):
        with contextlib.suppress(OSError):
            os.close(fd)


def _end(fd: int, *, writing: bool) -> Endpoint:
    end = open_endpoint(fd, writing=writing)
    assert end is not None
    return end


async def test_lines_are_read_whole_cut_at_the_limit_and_ended_by_eof(wire: tuple[int, int]) -> None:
    read_fd, write_fd = wire
    end = _end(read_fd, writing=False)
    reader = LineReader(end)
    os.write(write_fd, b'{"a":1}\n' + b"x" * 50 + b"\nlast without newline")
    assert await reader.readline(1000) == b'{"a":1}\n'
    assert await reader.readline(20) == b"x" * 20  # too long: the first `limit` bytes, as file.readline
    assert await reader.readline(1000) == b"x" * 30 + b"\n"
    os.close(write_fd)
    assert await reader.readline(1000) == b"last without newline"
    assert await reader.readline(1000) == b""
    end.close()


async def test_a_line_arriving_in_pieces_waits_for_its_end(wire: tuple[int, int]) -> None:
    read_fd, write_fd = wire
    end = _end(read_fd, writing=False)
    reader = LineReader(end)
    got: list[bytes] = []

    async def read() -> None:
        got.append(await reader.readline(1000))

    async with anyio.create_task_group() as tg:
        tg.start_soon(read)
        for piece in (b'{"jsonrpc":', b'"2.0",', b'"id":1}\n'):
            await anyio.sleep(0.05)
            assert not got  # the loop kept running while the reader waited
            os.write(write_fd, piece)
    assert got == [b'{"jsonrpc":"2.0","id":1}\n']
    end.close()


async def test_the_clients_end_stays_blocking(wire: tuple[int, int]) -> None:
    """The non-blocking flag is ours alone: the descriptors we were given keep their mode."""
    read_fd, write_fd = wire
    ends = [_end(read_fd, writing=False), _end(write_fd, writing=True)]
    for fd in (read_fd, write_fd):
        assert not fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_NONBLOCK
    for end in ends:
        end.close()


async def test_a_full_wire_parks_the_writer_not_the_loop(wire: tuple[int, int]) -> None:
    read_fd, write_fd = wire
    writer = MessageWriter(_end(write_fd, writing=True))
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
    assert bytes(received) == (message + "\n").encode()


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


def test_serving_from_files_keeps_the_threaded_path(sample_db: Path, tmp_path: Path) -> None:
    """`serve < requests > replies`: regular files cannot be polled, and are still served."""
    requests = tmp_path / "requests.jsonl"
    requests.write_text(
        '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
        '"capabilities":{},"clientInfo":{"name":"files","version":"0"}}}\n'
        '{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
        '{"jsonrpc":"2.0","id":2,"method":"tools/list"}\n'
    )
    replies = tmp_path / "replies.jsonl"
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data")}
    with requests.open("rb") as stdin, replies.open("wb") as stdout:
        done = subprocess.run(
            [sys.executable, "-m", "mcp_analysis", "--db", str(sample_db), "serve"],
            cwd=REPO,
            stdin=stdin,
            stdout=stdout,
            stderr=subprocess.PIPE,
            env=env,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr.decode()
    answers = {m["id"]: m for m in map(json.loads, replies.read_text().splitlines())}
    assert answers[1]["result"]["serverInfo"]["name"] == "mcp-analysis"
    assert {t["name"] for t in answers[2]["result"]["tools"]} >= {"search", "execute_code", "cite", "list_documents"}
