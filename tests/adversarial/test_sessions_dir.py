"""`sessions.dir` on a directory the server did not create: it owns only what it created.

An operator may point `sessions.dir` at a directory that holds other things (a shared
`/srv/state`, a 1777 scratch directory). The server must not change that directory's mode,
and its expiry must not delete files it did not write there, however old and however named:
it keeps its sessions in a subdirectory of its own (marked so it can recognise it) and only
ever deletes the files it wrote. A directory an earlier version created (only session files,
private to the server's user) is adopted as it is, so its sessions continue.
Everything here goes through a real `serve --http` process and real MCP clients.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import anyio
import pytest

from tests.mcp_helpers import HttpServer, http_server, text

pytestmark = pytest.mark.anyio

MARKER = ".mcp-analysis-sessions"
OWN_SUBDIR = "mcp-analysis-sessions"
TWO_HOURS = 2 * 3600
LOOKALIKE = "0123456789abcdef0123456789abcdef01234567"  # named like a session file, written by someone else


def env_for(directory: Path, tmp_path: Path, ttl: float = 3600) -> dict[str, str]:
    return {
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "MCP_ANALYSIS_SESSIONS__DIR": str(directory),
        "MCP_ANALYSIS_SESSIONS__TTL_SECONDS": str(ttl),
    }


def old_file(path: Path, body: bytes) -> Path:
    path.write_bytes(body)
    past = time.time() - TWO_HOURS
    os.utime(path, (past, past))
    return path


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def keep_a_session(server: HttpServer, value: int) -> str:
    """A sessionless call that keeps a variable: its session is written to the store."""
    async with server.client() as client:
        result = await client.call_tool("execute_code", {"code": f"kept = {value}"})
        assert not result.is_error and result.structured_content["success"], text(result)
        return str(result.structured_content["session"])


async def read_back(server: HttpServer, handle: str) -> str:
    async with server.client() as client:
        result = await client.call_tool("execute_code", {"code": "kept", "session": handle})
        assert not result.is_error, text(result)
        return str(result.structured_content["value"])


async def test_a_shared_directory_keeps_its_mode_and_its_files(sample_db: Path, tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    foreign = [
        old_file(shared / "config.json", b'{"owner": "another program"}\n'),
        old_file(shared / "config.bin", b"\x00\x01 another program's data"),
        old_file(shared / f"{LOOKALIKE}.json", b'{"version": 1, "owner": "x", "mac": "y"}\n{}'),
        old_file(shared / f"{LOOKALIKE}.kept", b""),
    ]
    # A short TTL: expiry passes run every ttl/2 s, and everything foreign is far older than it.
    with http_server(sample_db, env=env_for(shared, tmp_path, ttl=8), log_dir=tmp_path) as server:
        handle = await keep_a_session(server, 7)
        await anyio.sleep(5)  # at least one expiry pass (every 4 s), the session not yet idle for 8 s
        assert await read_back(server, handle) == "7"
    assert mode(shared) == 0o1777, oct(mode(shared))
    assert all(path.exists() for path in foreign), sorted(p.name for p in shared.iterdir())
    own = shared / OWN_SUBDIR
    assert (own / MARKER).is_file() and mode(own) == 0o700
    assert list(own.glob("*.json")), "the kept session lives in the server's own subdirectory"
    assert sorted(p.name for p in shared.iterdir()) == sorted([*(p.name for p in foreign), OWN_SUBDIR])


async def test_a_directory_an_earlier_version_made_is_adopted(sample_db: Path, tmp_path: Path) -> None:
    directory = tmp_path / "sessions"
    with http_server(sample_db, env=env_for(directory, tmp_path), log_dir=tmp_path) as server:
        handle = await keep_a_session(server, 11)
    assert (directory / MARKER).is_file() and mode(directory) == 0o700
    # What an earlier version left: the same files, private to this user, without the marker.
    (directory / MARKER).unlink()
    with http_server(sample_db, env=env_for(directory, tmp_path), log_dir=tmp_path) as server:
        assert await read_back(server, handle) == "11"
    assert (directory / MARKER).is_file()
    assert not (directory / OWN_SUBDIR).exists()


async def test_an_earlier_versions_sessions_move_out_of_a_mixed_directory(sample_db: Path, tmp_path: Path) -> None:
    directory = tmp_path / "sessions"
    with http_server(sample_db, env=env_for(directory, tmp_path), log_dir=tmp_path) as server:
        handle = await keep_a_session(server, 13)
    (directory / MARKER).unlink()
    # An earlier version pointed at a directory that also held the operator's files (and made it 0700).
    notes = old_file(directory / "notes.json", b'{"mine": true}')
    with http_server(sample_db, env=env_for(directory, tmp_path, ttl=8), log_dir=tmp_path) as server:
        assert await read_back(server, handle) == "13"
        await anyio.sleep(5)  # an expiry pass
    assert notes.read_bytes() == b'{"mine": true}'
    own = directory / OWN_SUBDIR
    assert (own / MARKER).is_file() and (own / "secret.key").is_file()
    assert sorted(p.name for p in directory.iterdir()) == [OWN_SUBDIR, "notes.json"]


async def test_a_subdirectory_the_server_cannot_trust_is_refused(sample_db: Path, tmp_path: Path) -> None:
    """Someone else made the server's subdirectory (or a link) first: nothing is written to or read from it."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (shared / OWN_SUBDIR).symlink_to(elsewhere)
    with http_server(sample_db, env=env_for(shared, tmp_path), log_dir=tmp_path) as server:
        async with server.client() as client:
            result = await client.call_tool("execute_code", {"code": "kept = 1"})
            assert not result.is_error, text(result)
    assert list(elsewhere.iterdir()) == []
    log = server.log.read_text()
    assert "Session persistence disabled" in log and OWN_SUBDIR in log, log[-3000:]
