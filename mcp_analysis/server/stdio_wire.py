"""The stdio wire read and written from the event loop, without a thread per line.

The SDK reads each stdin line and writes each stdout message through a worker thread
(`anyio.wrap_file`): three thread hand-offs per request, each a wake-up of another thread
that costs as much as the work on a small VM. A client's end of our stdio is almost always
a pipe (Python, Go, Rust clients) or a stream socket (Node's `child_process`, hence Claude
Desktop and the MCP Inspector); both can be polled by the event loop instead.

The descriptor flags that make them non-blocking belong to the open file *description*,
which the client or a terminal may share, so they are never set on what we were given:

- a pipe is opened again through ``/proc/self/fd`` (Linux): a description of our own, set
  non-blocking;
- a socket is read and written with ``MSG_DONTWAIT``, a per-call flag.

Anything else (a terminal, a file, a pipe where there is no ``/proc``, as on macOS, and
Windows) returns ``None`` and the caller keeps the thread-based path.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import sys
from collections.abc import Iterator

import anyio
import anyio.lowlevel

if sys.platform != "win32":
    import fcntl

_CHUNK = 256 * 1024
_RETRY_SECONDS = 1.0


class Endpoint:
    """One non-blocking end of the wire: `recv`/`send` raise BlockingIOError instead of waiting."""

    def __init__(self, fd: int, sock: socket.socket | None = None) -> None:
        self.fd = fd
        self._sock = sock

    def recv(self, size: int) -> bytes:
        if self._sock is not None:
            return self._sock.recv(size, socket.MSG_DONTWAIT)
        return os.read(self.fd, size)

    def send(self, data: memoryview) -> int:
        if self._sock is not None:
            return self._sock.send(data, socket.MSG_DONTWAIT)
        return os.write(self.fd, data)

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
        else:
            with contextlib.suppress(OSError):
                os.close(self.fd)


def open_endpoint(fd: int, *, writing: bool) -> Endpoint | None:
    """A non-blocking endpoint of its own on the pipe or socket behind `fd`, or None."""
    if sys.platform == "win32":
        return None
    try:
        given = os.fstat(fd)
        if stat.S_ISFIFO(given.st_mode):
            return _reopened_pipe(fd, given, writing)
        if stat.S_ISSOCK(given.st_mode):
            return _socket(fd)
    except OSError:  # no /proc, a pipe without a reader, a descriptor we may not reopen...
        return None
    return None


def _reopened_pipe(fd: int, given: os.stat_result, writing: bool) -> Endpoint | None:
    flags = (os.O_WRONLY if writing else os.O_RDONLY) | os.O_NONBLOCK | os.O_CLOEXEC
    new = os.open(f"/proc/self/fd/{fd}", flags)
    try:
        opened = os.fstat(new)
    except OSError:
        os.close(new)
        raise
    if (opened.st_dev, opened.st_ino) != (given.st_dev, given.st_ino) or not stat.S_ISFIFO(opened.st_mode):
        os.close(new)  # not the same pipe (a /proc that is not procfs, fd changed meanwhile)
        return None
    return Endpoint(new)


def _socket(fd: int) -> Endpoint | None:
    duplicate = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    flags = fcntl.fcntl(duplicate, fcntl.F_GETFL)
    try:
        sock = socket.socket(fileno=duplicate)
    except OSError:
        os.close(duplicate)
        raise
    try:
        # A process-wide socket.setdefaulttimeout() would have made the shared description
        # non-blocking and recv() wait: no timeout on our object, and the description's flags as given.
        sock.settimeout(None)
        fcntl.fcntl(duplicate, fcntl.F_SETFL, flags)
    except OSError:
        sock.close()
        raise
    if sock.type != socket.SOCK_STREAM:
        sock.close()  # our duplicate only
        return None
    return Endpoint(sock.fileno(), sock)


@contextlib.contextmanager
def endpoint(fd: int, *, writing: bool) -> Iterator[Endpoint | None]:
    opened = open_endpoint(fd, writing=writing)
    try:
        yield opened
    finally:
        if opened is not None:
            opened.close()


class LineReader:
    """`readline(limit)` over a non-blocking endpoint, as a binary file's readline would answer."""

    def __init__(self, end: Endpoint) -> None:
        self._end = end
        self._buffer = bytearray()
        self._eof = False

    async def readline(self, limit: int) -> bytes:
        waited = False
        searched = 0
        while True:
            newline = self._buffer.find(b"\n", searched, limit)
            if newline >= 0:
                line = self._take(newline + 1)
                break
            if len(self._buffer) >= limit:
                line = self._take(limit)
                break
            if self._eof:
                line = self._take(len(self._buffer))
                break
            searched = len(self._buffer)
            waited = await self._fill() or waited
        if not waited:
            # Each line gives the loop a turn, even when the data was already here: a client
            # pouring in blank or oversized lines must not keep it from everything else.
            await anyio.lowlevel.checkpoint()
        return line

    def _take(self, size: int) -> bytes:
        with memoryview(self._buffer) as view:  # one copy of a line that may be 64 MB, not two
            line = bytes(view[:size])
        del self._buffer[:size]
        return line

    async def _fill(self) -> bool:
        """Read what is there, waiting for it if nothing is; whether it waited (the loop ran)."""
        waited = False
        while True:
            try:
                chunk = self._end.recv(_CHUNK)
            except BlockingIOError:
                await anyio.wait_readable(self._end.fd)
                waited = True
                continue
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                self._eof = True
            self._buffer += chunk
            return waited


class MessageWriter:
    """The SDK transport's stdout (`write` then `flush` per message), written from the loop.

    A full pipe (a client that stops reading) parks only the writer task, as the SDK's
    thread would."""

    def __init__(self, end: Endpoint) -> None:
        self._end = end
        self._pending = bytearray()

    async def write(self, text: str) -> None:
        self._pending += text.encode("utf-8")

    async def flush(self) -> None:
        data, self._pending = memoryview(self._pending), bytearray()  # sent from where it is, not copied
        try:
            while data:
                try:
                    data = data[self._end.send(data) :]
                except BlockingIOError:
                    # Tried again every second: a socket whose peer shut its reading side is
                    # never reported writable, and only the next send says so (EPIPE).
                    with anyio.move_on_after(_RETRY_SECONDS):
                        await anyio.wait_writable(self._end.fd)
        finally:
            # Cancelled while the client was not reading: the rest stays first in line, so no
            # message is ever cut on the wire.
            self._pending[:0] = data
