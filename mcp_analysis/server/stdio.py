"""Serving over stdio with every malformed line answered.

The SDK's ``stdio_server()`` drops a line it cannot parse (a lone surrogate, a batch,
``hello world``...) without a reply, so the client waits until its own timeout. Here
our own reader takes stdin: each line goes through `screen()` (server/jsonrpc_screen.py);
a malformed one is answered on the wire with its JSON-RPC error, a good one is handed
to the SDK's transport unchanged, and serving goes on. The SDK keeps stdout (it points
fd 1 at stderr while serving, so stray prints never reach the wire); we point fd 0 at
the null device the same way, so nothing else in the process can read the protocol.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any, BinaryIO

import anyio
import mcp_types as types
from mcp.server import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

from mcp_analysis.sandbox.settings import SandboxSettings
from mcp_analysis.server.jsonrpc_screen import MAX_MESSAGE_BYTES, error_body, screen
from mcp_analysis.server.sdk_compat import lowlevel_server
from mcp_analysis.server.stdio_drain import AnsweringWriteStream, DrainingReadStream, Unanswered
from mcp_analysis.server.stdio_wire import LineReader, MessageWriter, endpoint

DRAIN_GRACE_SECONDS = 10.0  # beyond the code timeout: the interpreter's own grace and the reply

if sys.platform != "win32":  # the claims below are POSIX-only; Windows serves the std streams in place
    import fcntl


class ScreenedLines:
    """Async iterator over stdin lines the SDK will accept; answers the others itself."""

    def __init__(self, stdin: BinaryIO, reader: LineReader | None = None) -> None:
        self._stdin = stdin
        self._reader = reader  # polled from the event loop (server/stdio_wire.py), or None: a thread
        self._reply: Any = None
        self._reply_ready = anyio.Event()
        self._eof = False

    def answer_with(self, write_stream: Any) -> None:
        """Error replies go out through (a clone of) the transport's write stream."""
        self._reply = write_stream
        self._reply_ready.set()
        if self._eof:  # stdin already ended: the clone must not keep the writer alive
            write_stream.close()

    def __aiter__(self) -> ScreenedLines:
        return self

    async def __anext__(self) -> str:
        while True:
            line = await self._readline(MAX_MESSAGE_BYTES + 1)
            if not line:
                self._eof = True
                await self._close_reply()
                raise StopAsyncIteration
            if len(line) > MAX_MESSAGE_BYTES and not line.endswith(b"\n"):
                await self._skip_rest_of_line()
                await self._send(
                    error_body(
                        types.INVALID_REQUEST,
                        f"Invalid Request: a message may be at most {MAX_MESSAGE_BYTES:,} bytes.",
                    )
                )
                continue
            if not line.strip():
                continue
            # Screened without our framing: a parse error's position is one in the client's message.
            rejection = screen(line.rstrip(b"\r\n"))
            if rejection is None:
                return line.decode("utf-8")
            await self._send(rejection)

    async def _readline(self, limit: int) -> bytes:
        if self._reader is not None:
            return await self._reader.readline(limit)
        # A blocking read in a worker thread; abandoned (not waited for) when serving stops.
        return await anyio.to_thread.run_sync(self._stdin.readline, limit, abandon_on_cancel=True)

    async def _skip_rest_of_line(self) -> None:
        while True:
            chunk = await self._readline(MAX_MESSAGE_BYTES)
            if not chunk or chunk.endswith(b"\n"):
                return

    async def _send(self, body: bytes) -> None:
        await self._reply_ready.wait()
        message = types.jsonrpc_message_adapter.validate_json(body, by_name=False)
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            await self._reply.send(SessionMessage(message))

    async def _close_reply(self) -> None:
        # The SDK's stdout writer ends only when every clone of its stream is closed.
        if self._reply is not None:
            await self._reply.aclose()


@contextlib.contextmanager
def _diverted(fd: int, diversion: int, *, close_after: bool) -> Iterator[int]:
    """`fd` points at `diversion` (taken over) meanwhile; yields a private duplicate of what it was,
    closed after `fd` is put back if `close_after` (stdin's is not: a reader thread may still block on it)."""
    private = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    os.dup2(diversion, fd)
    os.close(diversion)
    try:
        yield private
    finally:
        with contextlib.suppress(OSError):
            os.dup2(private, fd)
        if close_after:
            os.close(private)


@contextlib.contextmanager
def _claimed_stdin() -> Iterator[BinaryIO]:
    """A private handle on the protocol's stdin; fd 0 points at the null device meanwhile."""
    if sys.platform == "win32" or not _backed_by(sys.stdin, 0):
        yield sys.stdin.buffer
        return
    with _diverted(0, os.open(os.devnull, os.O_RDONLY), close_after=False) as private:
        # closefd=False: a reader thread may still block on it after we return (as in the SDK).
        yield os.fdopen(private, "rb", closefd=False)


def _backed_by(stream: Any, fd: int) -> bool:
    try:
        return bool(stream.buffer.fileno() == fd)
    except (AttributeError, OSError, ValueError):
        return False


@contextlib.contextmanager
def _claimed_stdout() -> Iterator[MessageWriter | None]:
    """Our own writer on the protocol's stdout, fd 1 pointing at stderr meanwhile; or None,
    and the SDK claims and writes stdout itself (a terminal, a file, Windows...)."""
    if sys.platform == "win32" or not _backed_by(sys.stdout, 1):
        yield None
        return
    with endpoint(1, writing=True) as wire:
        if wire is None:
            yield None
            return
        try:
            diversion = os.dup(2)
        except OSError:
            diversion = os.open(os.devnull, os.O_WRONLY)
        with contextlib.suppress(Exception):
            sys.stdout.flush()  # what was printed before serving still goes out first
        with _diverted(1, diversion, close_after=True):  # no thread writes to the duplicate
            try:
                yield MessageWriter(wire)
            finally:
                with contextlib.suppress(Exception):
                    sys.stdout.flush()  # a print made while serving goes to stderr, not the wire


@contextlib.asynccontextmanager
async def screened_stdio() -> AsyncIterator[tuple[Any, Any]]:
    """``stdio_server()`` with our screening reader on stdin (and our writer on stdout)."""
    with _claimed_stdin() as raw_stdin, _polled(raw_stdin) as reader, _claimed_stdout() as writer:
        lines = ScreenedLines(raw_stdin, reader)
        async with stdio_server(stdin=lines, stdout=writer) as (read_stream, write_stream):  # type: ignore[arg-type]
            lines.answer_with(write_stream.clone())
            yield read_stream, write_stream


@contextlib.contextmanager
def _polled(stdin: BinaryIO) -> Iterator[LineReader | None]:
    try:
        fd = stdin.fileno()
    except (AttributeError, OSError, ValueError):
        yield None
        return
    with endpoint(fd, writing=False) as wire:
        yield None if wire is None else LineReader(wire)


async def serve_stdio(server: MCPServer) -> None:
    """What ``MCPServer.run_stdio_async()`` does, with every malformed line answered, and every
    request read before stdin ends answered before serving stops (server/stdio_drain.py)."""
    lowlevel = lowlevel_server(server)
    unanswered = Unanswered()
    async with screened_stdio() as (read_stream, write_stream):
        await lowlevel.run(
            DrainingReadStream(read_stream, unanswered, _drain_limit(server)),
            AnsweringWriteStream(write_stream, unanswered),
            lowlevel.create_initialization_options(),
        )


def _drain_limit(server: MCPServer) -> float:
    """The longest a request may still run once stdin has ended: an execute_code at its timeout."""
    runtime = getattr(server, "runtime", None)  # a server without our runtime: the setting's default
    sandbox = runtime.settings.sandbox if runtime is not None else SandboxSettings()
    return sandbox.code_timeout + DRAIN_GRACE_SECONDS
