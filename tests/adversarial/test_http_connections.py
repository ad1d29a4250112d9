"""Clients that hold connections, or tokens that should no longer open them, against a real HTTP server.

The server runs as an operator would start it (`serve --http --tokens-file`), under the usual soft
limit of 1,024 open files. Without a token, a client opening more connections than that, each with
half a request, must not stop the server serving others; a connection whose request does not arrive
whole within `server.client_stall_seconds` is closed, a keep-alive one included. A token removed from
the tokens file is refused from then on, without a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx2
import pytest

from tests.mcp_helpers import http_server
from tests.services import free_port, wait_for_port

pytestmark = pytest.mark.timeout(300)

FILES = 1024  # the soft limit of open files most services start under (systemd's default)
READ_SECONDS = 2.0  # server.client_stall_seconds for this server
ALICE, BOB = "alice-token-0123456789abcdef", "bob-token-0123456789abcdef"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


@dataclass
class Server:
    port: int
    tokens: Path
    log: Path

    def initialize(self, token: str) -> int:
        headers = {"authorization": f"Bearer {token}", "accept": "application/json, text/event-stream"}
        url = f"http://127.0.0.1:{self.port}/mcp"
        return httpx2.post(url, headers=headers, json=INITIALIZE, timeout=30).status_code

    def healthz(self) -> str:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=5) as sock:
                sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                return sock.recv(100).split(b"\r\n", 1)[0].decode()
        except OSError as exc:
            return f"{type(exc).__name__}: {exc}"


def write_tokens(path: Path, *tokens: tuple[str, str]) -> None:
    path.write_text("tokens:\n" + "".join(f'  - name: {name}\n    token: "{token}"\n' for name, token in tokens))


@pytest.fixture(scope="module")
def server(sample_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    place = tmp_path_factory.mktemp("connections")
    tokens = place / "tokens.yaml"
    write_tokens(tokens, ("alice", ALICE), ("bob", BOB))
    tokens.chmod(0o600)
    env = {"MCP_ANALYSIS_SERVER__CLIENT_STALL_SECONDS": str(READ_SECONDS)}
    with http_server(sample_db, "--tokens-file", str(tokens), env=env, log_dir=place, open_files=FILES) as serving:
        running = Server(serving.port, tokens, serving.log)
        deadline = time.monotonic() + 90
        while not running.healthz().endswith("200 OK"):  # the knowledge base opening
            assert time.monotonic() < deadline, serving.log.read_text()[-2000:]
            time.sleep(0.3)
        yield running


def half_request(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    return sock


def closed_within(sock: socket.socket, seconds: float) -> bool:
    """Whether the server closes `sock` within `seconds` (what it sent before is read and dropped)."""
    sock.settimeout(seconds)
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            if sock.recv(4096) == b"":
                return True
    except (TimeoutError, ConnectionResetError):
        return False
    return False


def test_more_idle_connections_than_the_process_may_open_files_do_not_stop_it_serving(server: Server) -> None:
    held: list[socket.socket] = []
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < 4 * FILES:  # this process holds the clients' ends
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(4 * FILES, hard), hard))
    try:
        for _ in range(FILES + 50):  # no token needed: nothing was read yet
            held.append(half_request(server.port))
        assert server.healthz().endswith("200 OK")
        assert server.initialize(ALICE) == 200
    finally:
        for sock in held:
            sock.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    said = " ".join(server.log.read_text(errors="replace").split())
    assert "Too many open files" not in said
    assert "DeprecationWarning" not in said  # the SDK's auth settings given in full
    assert "while more than 256 waited (server.max_pending_connections)" in said


def test_pipelined_requests_whose_answers_are_never_read_do_not_hold_the_server(server: Server) -> None:
    """Whole requests, so never waiting for one: the connections wait on their clients to read them, or
    are being served; either way the address holding most connections makes room for others."""
    pipelined = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" * 1000
    held: list[socket.socket] = []
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < 4 * FILES:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(4 * FILES, hard), hard))
    try:
        for i in range(FILES + 100):  # paced: each is read before a flood's worth of others arrives
            if i % 50 == 0:
                time.sleep(0.1)
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.bind(("127.0.0.2", 0))  # another address than the clients served meanwhile
            sock.connect(("127.0.0.1", server.port))
            sock.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                sock.send(pipelined)
            held.append(sock)
        time.sleep(2 * READ_SECONDS)
        assert [server.healthz() for _ in range(3)] == ["HTTP/1.1 200 OK"] * 3
    finally:
        for sock in held:
            sock.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_request_that_does_not_arrive_whole_in_time_is_closed_keep_alive_or_not(server: Server) -> None:
    fresh = half_request(server.port)
    kept = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    kept.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")  # answered, the connection kept alive
    assert kept.recv(100).startswith(b"HTTP/1.1 200")
    kept.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 500\r\n\r\n{")  # then a trickle
    try:
        assert closed_within(fresh, READ_SECONDS + 3)
        assert closed_within(kept, READ_SECONDS + 3)
    finally:
        fresh.close()
        kept.close()


def test_a_token_removed_from_the_tokens_file_is_refused_without_a_restart(server: Server) -> None:
    assert (server.initialize(ALICE), server.initialize(BOB)) == (200, 200)
    write_tokens(server.tokens, ("bob", BOB))  # alice's token revoked
    deadline = time.monotonic() + 10
    while server.initialize(ALICE) != 401:
        assert time.monotonic() < deadline, "the revoked token still opens sessions"
        time.sleep(0.3)
    assert server.initialize(BOB) == 200  # unchanged: it never stopped working
    settled = "changed: 1 token(s) accepted from now on"
    while settled not in " ".join(server.log.read_text(errors="replace").split()):  # once it held still
        assert time.monotonic() < deadline + 10, "the changed tokens file never took hold whole"
        assert server.initialize(BOB) == 200
        time.sleep(0.3)


async def _app(scope: dict, receive: Callable[[], Awaitable[dict]], send: Callable[[dict], Awaitable[None]]) -> None:
    """An application that streams for two read deadlines (`/stream`), or takes its body only after
    two read deadlines (`/late`), as a busy server might."""
    if scope["type"] != "http":
        return
    if scope["path"] == "/stream":
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        for _ in range(4):
            await send({"type": "http.response.body", "body": b"data: x\n\n", "more_body": True})
            await asyncio.sleep(GUARD_SECONDS / 2)
        await send({"type": "http.response.body", "body": b""})
        return
    await asyncio.sleep(2 * GUARD_SECONDS)
    size, more = 0, True
    while more:
        message = await receive()
        size, more = size + len(message.get("body", b"")), message.get("more_body", False)
    answer = str(size).encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"%d" % len(answer))]})
    await send({"type": "http.response.body", "body": answer})


GUARD_SECONDS = 1.0


@pytest.fixture(scope="module")
def guarded() -> Iterator[int]:
    """uvicorn in a thread with the guarded protocol (4 may wait, 1 s to send a request) and `_app`."""
    import uvicorn

    from mcp_analysis.server.connections import guarded_h11

    port = free_port()
    config = uvicorn.Config(_app, host="127.0.0.1", port=port, http=guarded_h11(4, GUARD_SECONDS), log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_for_port(port, None, 30, "uvicorn")
    yield port
    server.should_exit = True
    thread.join(timeout=10)


def answer(sock: socket.socket, seconds: float) -> bytes:
    """What the server sends until it closes or `seconds` pass."""
    sock.settimeout(seconds)
    got, deadline = b"", time.monotonic() + seconds
    with contextlib.suppress(TimeoutError, ConnectionResetError):
        while time.monotonic() < deadline and (chunk := sock.recv(65536)):
            got += chunk
    return got


def test_a_stream_and_a_body_the_application_reads_late_outlast_the_read_deadline(guarded: int) -> None:
    with socket.create_connection(("127.0.0.1", guarded)) as stream:
        stream.sendall(b"GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
        sent = answer(stream, 4 * GUARD_SECONDS)
    assert sent.count(b"data: x") == 4 and sent.endswith(b"0\r\n\r\n")  # whole, past two deadlines
    body = b"a" * 2_000_000  # past uvicorn's 64 KiB: it stops reading until the application takes it
    with socket.create_connection(("127.0.0.1", guarded)) as late:
        late.sendall(b"POST /late HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        assert answer(late, 5 * GUARD_SECONDS).endswith(b"\r\n\r\n2000000")
    with socket.create_connection(("127.0.0.1", guarded)) as trickle:
        trickle.sendall(b"POST /late HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n01234")  # the rest never
        started = time.monotonic()
        assert answer(trickle, 4 * GUARD_SECONDS) == b""
        assert time.monotonic() - started < 3 * GUARD_SECONDS  # closed at its deadline, not at the read's end
