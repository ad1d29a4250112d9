"""Requests read before stdin ends are answered before the server stops (server/stdio_drain.py).

A client that half-closes after its last request is waiting for the answers; the SDK cancels
whatever is still running at the end of stdin, and a reader that meets the end in the same
turn as the last line would cancel even a ping. Real `serve` processes, over a pipe and over a
socket shut for writing (as a Node client can).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.shared.message import SessionMessage

from mcp_analysis.server.stdio_drain import Unanswered
from tests.conftest import REPO

HANDSHAKE = (
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
    b'"capabilities":{},"clientInfo":{"name":"drain","version":"0"}}}\n'
    b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
)
LAST_WORDS = b'{"jsonrpc":"2.0","id":2,"method":"ping"}\n{"jsonrpc":"2.0","id":3,"method":"tools/list"}\n'


def _serve(sample_db: Path, tmp_path: Path, stdin: Any, **env: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "mcp_analysis", "--db", str(sample_db), "serve"],
        cwd=REPO,
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "XDG_DATA_HOME": str(tmp_path / "data"), **env},
    )


def _ids(out: bytes) -> list[Any]:
    return [json.loads(line)["id"] for line in out.splitlines()]


@pytest.mark.parametrize("wire", ["pipe", "socket shut for writing"])
def test_requests_sent_just_before_the_end_of_stdin_are_answered(sample_db: Path, tmp_path: Path, wire: str) -> None:
    if wire == "pipe":
        server = _serve(sample_db, tmp_path, subprocess.PIPE)
        assert server.stdin is not None
        send, end = server.stdin.write, server.stdin.close
        flush = server.stdin.flush
    else:
        ours, theirs = socket.socketpair()
        server = _serve(sample_db, tmp_path, theirs)
        theirs.close()
        send, end, flush = ours.sendall, (lambda: ours.shutdown(socket.SHUT_WR)), (lambda: None)
    assert server.stdout is not None
    try:
        send(HANDSHAKE)
        flush()
        assert json.loads(server.stdout.readline())["id"] == 1
        send(LAST_WORDS)
        flush()
        end()  # at once: the answers are still to come
        out = server.stdout.read()
        assert server.wait(timeout=120) == 0
        assert sorted(_ids(out)) == [2, 3]
    finally:
        server.kill()
        server.wait()
        if wire != "pipe":
            ours.close()


def test_a_request_the_client_cancelled_does_not_hold_the_end(sample_db: Path, tmp_path: Path) -> None:
    server = _serve(sample_db, tmp_path, subprocess.PIPE, MCP_ANALYSIS_SANDBOX__CODE_TIMEOUT="60")
    assert server.stdin is not None and server.stdout is not None
    try:
        server.stdin.write(HANDSHAKE)
        server.stdin.flush()
        assert json.loads(server.stdout.readline())["id"] == 1
        server.stdin.write(
            b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"execute_code",'
            b'"arguments":{"code":"sum(range(10**11))"}}}\n'
        )
        server.stdin.flush()
        time.sleep(1)
        server.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}\n')
        server.stdin.close()
        started = time.monotonic()
        out = server.stdout.read()
        assert server.wait(timeout=60) == 0
        assert time.monotonic() - started < 30  # not the 60 s the code could still run
        assert 5 not in _ids(out)
    finally:
        server.kill()
        server.wait()


def _request(request_id: Any, method: str = "ping") -> SessionMessage:
    return SessionMessage(types.JSONRPCRequest(jsonrpc="2.0", id=request_id, method=method))


def _response(request_id: Any) -> SessionMessage:
    return SessionMessage(types.JSONRPCResponse(jsonrpc="2.0", id=request_id, result={}))


@pytest.mark.anyio
async def test_the_ledger_counts_reused_ids_cancellations_and_stray_answers() -> None:
    ledger = Unanswered()
    await ledger.all_answered(0.01)  # nothing read: done at once
    for item in (_request(1), _request(1), _request("a"), _request(2)):
        ledger.read(item)
    ledger.answered(_response(99))  # an answer to nothing read changes nothing
    ledger.answered(_response(1))
    ledger.read(
        SessionMessage(
            types.JSONRPCNotification(jsonrpc="2.0", method="notifications/cancelled", params={"requestId": 2})
        )
    )
    ledger.answered(_response("a"))
    started = time.monotonic()
    await ledger.all_answered(0.3)  # the second request 1 is still open: the wait runs out
    assert time.monotonic() - started >= 0.25
    ledger.answered(_response(1))
    started = time.monotonic()
    await ledger.all_answered(5)
    assert time.monotonic() - started < 1
