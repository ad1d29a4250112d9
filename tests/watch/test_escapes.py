"""Ways out of a folder added, synced or watched, and the server's own files, through the real command line.

A link dropped into a folder (to an outside file or folder, made before `sync` or while
`serve --watch` runs) is refused and named, never followed: nothing outside the folders becomes
a document. The configuration file in use, the tokens file and the sessions folder lying inside
the folder are never read and are named in a warning. A watched folder deleted (or replaced) and
made again is followed again. Every wait is a poll against a deadline, never a fixed sleep.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import anyio
import pytest

from mcp_analysis.corpus import KnowledgeBase
from tests.conftest import REPO, make_settings, run_cli
from tests.mcp_helpers import HttpServer, http_server
from tests.watch.polling import eventually

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(900)]

SECRET = "The vault code is 4711, never to be ingested."
#: The servers check their watched folders this often (watch.root_poll_seconds; 2 s by default).
ROOT_POLL_SECONDS = 0.5
ROOT_POLL = {"MCP_ANALYSIS_WATCH__ROOT_POLL_SECONDS": str(ROOT_POLL_SECONDS)}


def note(path: Path, title: str, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# {title}\n\n{body}\n")
    return path


def outside(place: Path) -> tuple[Path, Path]:
    """A secret file and a private folder beside the folders under test."""
    secret = note(place / "outside" / "secret.md", "Secret", SECRET)
    private = place / "outside" / "private"
    note(private / "inside.md", "Private", "A private note about the vault.")
    return secret, private


async def uris(db: Path) -> set[str]:
    kb = await KnowledgeBase.open(make_settings(db))
    try:
        return {m.uri for m in await kb.store.all_meta()}
    finally:
        await kb.close()


def test_sync_refuses_links_out_of_the_folder_and_names_them(tmp_path: Path) -> None:
    secret, private = outside(tmp_path)
    folder, db = tmp_path / "folder", tmp_path / "kb.lancedb"
    good = note(folder / "good.md", "Good", "The lighthouse keeper counts albatrosses.")
    (folder / "link.md").symlink_to(secret)
    (folder / "away").symlink_to(private)
    (folder / "again.md").symlink_to(good)  # a link inside: good.md is its document, read once
    env = {"XDG_DATA_HOME": str(tmp_path / "data")}

    result = run_cli("--db", str(db), "sync", str(folder), "--json", env=env)
    assert anyio.run(uris, db) == {good.as_uri()}  # neither the secret nor the private note
    assert result.returncode == 1, result.stderr  # the refused links are reported as failures
    failed = dict(json.loads(result.stdout)["failed"])
    assert set(failed) == {str(folder / "link.md"), str(folder / "away")}, failed
    assert "a symbolic link to a file outside" in failed[str(folder / "link.md")]
    assert "a symbolic link to a folder outside" in failed[str(folder / "away")]

    (folder / "link.md").unlink()
    (folder / "away").unlink()
    result = run_cli("--db", str(db), "sync", str(folder), env=env)
    assert result.returncode == 0, result.stderr
    assert "0 added, 0 replaced, 1 unchanged, 0 removed, 0 failed" in result.stdout
    assert anyio.run(uris, db) == {good.as_uri()}


def test_a_document_an_earlier_version_made_through_a_link_is_named(tmp_path: Path) -> None:
    """Earlier versions stored a link's target under the target's uri; which document came through a
    link was never recorded, so a sync names such a document (while the link is there) and keeps it."""
    secret, _ = outside(tmp_path)
    folder, db = tmp_path / "folder", tmp_path / "kb.lancedb"
    note(folder / "good.md", "Good", "The lighthouse keeper counts albatrosses.")
    env = {"XDG_DATA_HOME": str(tmp_path / "data")}
    assert run_cli("--db", str(db), "add", str(secret), env=env).returncode == 0  # as the target was stored
    (folder / "link.md").symlink_to(secret)
    result = run_cli("--db", str(db), "sync", str(folder), env=env)
    assert result.returncode == 1, result.stderr
    told = " ".join(result.stderr.split())
    assert f"{folder / 'link.md'} links to {secret.as_uri()}, a document of this knowledge base" in told
    assert "mcp-analysis rm" in told
    assert secret.as_uri() in anyio.run(uris, db)


def test_a_link_named_on_the_add_command_line_is_followed(tmp_path: Path) -> None:
    """The user's explicit choice: the link's target is added, under the target's own uri."""
    secret, _ = outside(tmp_path)
    (tmp_path / "link.md").symlink_to(secret)
    env = {"XDG_DATA_HOME": str(tmp_path / "data")}
    result = run_cli("--db", str(tmp_path / "kb.lancedb"), "add", str(tmp_path / "link.md"), env=env)
    assert result.returncode == 0, result.stderr
    assert anyio.run(uris, tmp_path / "kb.lancedb") == {secret.as_uri()}


def test_the_servers_own_files_in_the_folder_are_never_documents(tmp_path: Path) -> None:
    folder, db = tmp_path / "work", tmp_path / "kb"
    notes = note(folder / "notes.md", "Notes", "The quarterly plan.")
    (folder / "mcp-analysis.yaml").write_text(
        "sessions:\n"
        "  secret: secret-token-signing-key-0123456789\n"
        "  encryption_key: secret-token-encryption-0123456789\n"
        "  dir: sessions\n"
        "server:\n"
        "  tokens_file: tokens.yaml\n"
    )
    (folder / "tokens.yaml").write_text(
        "tokens:\n  - name: alice\n    token: secret-token-of-alice-0123456789\n    filter: \"uri LIKE '%'\"\n"
    )
    note(folder / "sessions" / "kept.md", "Session", "A hibernated session's secret token.")
    (folder / "kb-link").symlink_to("../kb")  # a link to the knowledge base: never read, and no failure
    env = {"XDG_DATA_HOME": str(tmp_path / "data")}

    for command in (["sync", "."], ["add", "."]):
        # From `folder`, where the default config file mcp-analysis.yaml is read.
        result = run_cli("--db", "../kb", *command, env=env, cwd=folder, unset=["MCP_ANALYSIS_CONFIG"])
        assert anyio.run(uris, db) == {notes.as_uri()}, command
        assert result.returncode == 0, result.stderr
        told = " ".join(result.stderr.split())
        for name, why in (
            ("mcp-analysis.yaml", "the configuration file in use"),
            ("tokens.yaml", "the bearer tokens file (server.tokens_file)"),
            ("sessions", "the folder of hibernated sessions (sessions.dir)"),
        ):
            assert f"{folder / name} lies inside the" in told and why in told, (command, told)
        if command[0] == "add":
            assert f"{folder / 'kb-link'} links to the knowledge base's own folder" in told, told


def test_a_hard_link_to_the_config_or_tokens_file_is_never_a_document(tmp_path: Path) -> None:
    """The same file under another name (a hard link dropped into the folder) is still the server's own;
    a tokens file is a secret by its content besides, whoever runs the command."""
    folder, db = tmp_path / "work", tmp_path / "kb"
    notes = note(folder / "notes.md", "Notes", "The quarterly plan.")
    config, tokens = tmp_path / "mcp-analysis.yaml", tmp_path / "tokens.yaml"  # outside the folder
    config.write_text("sessions:\n  secret: a-secret-that-signs-session-handles-0123456789\n")
    tokens.write_text("tokens:\n  - name: alice\n    token: secret-token-of-alice-0123456789\n")
    os.link(config, folder / "innocent.txt")
    os.link(tokens, folder / "harmless.txt")
    env = {"XDG_DATA_HOME": str(tmp_path / "data"), "MCP_ANALYSIS_CONFIG": str(config)}
    for command in (["sync", str(folder)], ["add", str(folder)], ["add", str(folder / "innocent.txt")]):
        result = run_cli("--db", str(db), *command, env=env)
        assert anyio.run(uris, db) == {notes.as_uri()}, (command, result.stderr)
        assert result.returncode == 1, result.stderr
        told = " ".join(result.stderr.split())
        assert "the configuration file in use (it may hold secrets), under another name (a hard link)" in told, told
        if command[-1] == str(folder):
            assert f"{folder / 'harmless.txt'}: it is a file of bearer tokens" in told, told


def test_a_hard_link_to_a_file_in_the_sessions_folder_is_never_a_document(tmp_path: Path) -> None:
    """A hibernated session's record (JSON: a client's state) under another name in the folder is still
    the server's own; a file with two names elsewhere is read as usual."""
    folder, db, data = tmp_path / "work", tmp_path / "kb", tmp_path / "data"
    notes = note(folder / "notes.md", "Notes", "The quarterly plan.")
    record = data / "mcp-analysis" / "sessions" / "0f3a.json"
    record.parent.mkdir(parents=True)
    record.write_text('{"key": "alice", "state": {"variables": "the private figures of alice"}}\n')
    os.link(record, folder / "record.json")
    elsewhere = tmp_path / "elsewhere.md"
    elsewhere.write_text("# Shared\n\nA note with two names.\n")
    os.link(elsewhere, folder / "shared.md")

    result = run_cli("--db", str(db), "add", str(folder), env={"XDG_DATA_HOME": str(data)})

    assert anyio.run(uris, db) == {notes.as_uri(), (folder / "shared.md").as_uri()}, result.stderr
    assert result.returncode == 1, result.stderr
    told = " ".join(result.stderr.split())
    assert "the folder of hibernated sessions (sessions.dir), under another name (a hard link)" in told, told


# --- serve --watch: one server for the module, two watched folders ----------------------------


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("escapes")


@pytest.fixture(scope="module")
def server(place: Path) -> Iterator[HttpServer]:
    note(place / "linked" / "start.md", "Start", "Present at start: the okapi.")
    note(place / "comes-and-goes" / "first.md", "First", "Present at start: the narwhal.")
    note(place / "unmounted" / "kept.md", "Kept", "Present at start: the dugong.")
    env = {
        "XDG_DATA_HOME": str(place / "data"),
        "MCP_ANALYSIS_WATCH__SETTLE_SECONDS": "0.5",
        **ROOT_POLL,
    }
    folders = ("--watch", str(place / "linked"), "--watch", str(place / "comes-and-goes"))
    folders += ("--watch", str(place / "unmounted"))
    with http_server(place / "kb.lancedb", *folders, env=env, log_dir=place) as running:
        yield running


async def listed(server: HttpServer) -> set[str]:
    async with server.client() as client:
        documents = (await client.call_tool("list_documents", {})).structured_content["documents"]
    return {d["uri"] for d in documents}


def logged(server: HttpServer, text: str) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return text in " ".join(server.log.read_text(errors="replace").split())

    return check


async def test_links_made_while_watching_are_refused_and_named(server: HttpServer, place: Path) -> None:
    folder = place / "linked"
    await eventually(lambda: _has(server, folder / "start.md"), "the start-up mirror")
    secret, private = outside(place)
    (folder / "link.md").symlink_to(secret)
    (folder / "away").symlink_to(private)
    marker = note(folder / "marker.md", "Marker", "After the links.")
    await eventually(lambda: _has(server, marker), "a marker")
    note(private / "later.md", "Later", "Written into the linked folder while it is linked.")
    second = note(folder / "second-marker.md", "Marker", "After a file written through the link.")
    await eventually(lambda: _has(server, second), "a second marker")
    found = await listed(server)
    assert not [uri for uri in found if "/outside/" in uri], found
    await eventually(logged(server, f"could not add {folder / 'link.md'}: a symbolic link to a file outside"), "link")
    await eventually(logged(server, f"could not add {folder / 'away'}: a symbolic link to a folder outside"), "away")


async def test_a_watched_folder_deleted_and_made_again_is_followed_again(server: HttpServer, place: Path) -> None:
    folder = place / "comes-and-goes"
    await eventually(lambda: _has(server, folder / "first.md"), "the start-up mirror")
    shutil.rmtree(folder)
    await eventually(logged(server, f"watched folder {folder} is gone; waiting for it"), "the folder noticed gone")
    second = note(folder / "second.md", "Second", "Made again: the axolotl.")
    await eventually(lambda: _has(server, second), "the folder made again is mirrored")
    await eventually(lambda: _lacks(server, folder / "first.md"), "a file not there once it is back goes")
    third = note(folder / "third.md", "Third", "Later: a quokka.")
    await eventually(lambda: _has(server, third), "then followed")
    await eventually(logged(server, f"{folder} is back; mirroring it"), "the folder noticed back")

    fresh = place / "fresh"  # rsync --delete-after style: a new folder renamed over the old one
    fourth = note(fresh / "fourth.md", "Fourth", "Replaced whole: a pangolin.")
    folder.rename(place / "old")
    fresh.rename(folder)
    await eventually(lambda: _has(server, folder / fourth.name), "the replacing folder is mirrored")
    await eventually(lambda: _lacks(server, second), "the replaced folder's documents go")
    fifth = note(folder / "fifth.md", "Fifth", "Then: a kiwi.")
    await eventually(lambda: _has(server, fifth), "and followed")
    note(place / "old" / "sixth.md", "Sixth", "Written into the folder renamed away.")
    seventh = note(folder / "seventh.md", "Seventh", "A marker.")
    await eventually(lambda: _has(server, seventh), "a marker")
    assert (place / "old" / "sixth.md").as_uri() not in await listed(server)
    assert (folder / "sixth.md").as_uri() not in await listed(server)


async def test_a_watched_folder_gone_for_a_while_keeps_its_documents(server: HttpServer, place: Path) -> None:
    """Unmounted or renamed away (no file events): its documents stay, with their ids, and what
    changed meanwhile is mirrored once it is back."""
    folder, away = place / "unmounted", place / "unmounted-away"
    kept = folder / "kept.md"
    await eventually(lambda: _has(server, kept), "the start-up mirror")
    before = await ids(server)
    folder.rename(away)
    gone = f"watched folder {folder} is gone; waiting for it (its documents are kept)"
    await eventually(logged(server, gone), "the folder noticed gone")
    note(away / "meanwhile.md", "Meanwhile", "Written while it was away: the tapir.")
    await anyio.sleep(4 * ROOT_POLL_SECONDS)  # a watcher that removed a gone folder's documents has done so
    # A barrier: a change in another watched folder applied after that means the apply loop has run.
    marker = note(place / "linked" / "marker-gone.md", "Marker", "Applied after the folder went: the tamandua.")
    await eventually(lambda: _has(server, marker), "a later change elsewhere")
    assert await _has(server, kept)
    away.rename(folder)
    await eventually(lambda: _has(server, folder / "meanwhile.md"), "what changed meanwhile, once back")
    await eventually(logged(server, f"{folder} is back; mirroring it"), "back")
    assert (await ids(server))[kept.as_uri()] == before[kept.as_uri()]  # the same document: not read again


async def ids(server: HttpServer) -> dict[str, str]:
    async with server.client() as client:
        documents = (await client.call_tool("list_documents", {})).structured_content["documents"]
    return {d["uri"]: d["id"] for d in documents}


async def _has(server: HttpServer, path: Path) -> bool:
    return path.as_uri() in await listed(server)


async def _lacks(server: HttpServer, path: Path) -> bool:
    return path.as_uri() not in await listed(server)


def test_the_settle_check_never_walks_a_link(tmp_path: Path) -> None:
    """A linked folder's files never count in whether a path held still (nor are they stat-ed)."""
    from mcp_analysis.watch.follow import signature

    _, private = outside(tmp_path)
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "away").symlink_to(private)
    before = (signature(folder), signature(folder / "away"))
    note(private / "later.md", "Later", "Written through nothing: beside the link's target.")
    assert (signature(folder), signature(folder / "away")) == before


def test_a_folder_that_cannot_be_listed_keeps_its_documents(tmp_path_factory: pytest.TempPathFactory) -> None:
    """A folder the server may no longer list (a permission or ACL change) is not an emptied one:
    `sync` says so by name and removes nothing under it. Root lists every folder, so as root the
    command runs without its capabilities (setpriv), as a server run by an ordinary user does."""
    base = Path(tempfile.mkdtemp(prefix="unlisted-", dir="/tmp"))
    try:
        folder, db = base / "folder", base / "kb.lancedb"
        locked = note(folder / "locked" / "a.md", "Locked", "Soon unlisted: the quoll.").parent
        note(folder / "b.md", "Open", "Always readable: the bilby.")
        env = {"XDG_DATA_HOME": str(base / "data")}
        as_user = ["setpriv", "--bounding-set=-all", "--inh-caps=-all"] if os.geteuid() == 0 else []

        def sync() -> subprocess.CompletedProcess[str]:
            command = [*as_user, sys.executable, "-m", "mcp_analysis", "--db", str(db), "sync", str(folder)]
            return subprocess.run(
                command, cwd=REPO, env={**os.environ, **env}, capture_output=True, text=True, timeout=300
            )

        first = sync()
        assert "2 added" in first.stdout, first.stderr
        locked.chmod(0o000)
        second = sync()
        assert second.returncode == 1, second.stderr
        told = " ".join(second.stderr.split())
        assert f"{locked}: could not be read (Permission denied): its documents are kept" in told
        assert "0 removed" in second.stdout and "1 unchanged" in second.stdout
    finally:
        for path in base.rglob("*"):
            if path.is_dir():
                path.chmod(0o777)
        shutil.rmtree(base)


async def test_an_unmounted_share_keeps_its_documents(tmp_path: Path) -> None:
    """A watched folder that is a mount point: unmounted, the empty folder beneath is no emptied
    share (mirroring it removed every document, and the remount read and embedded them all again)."""
    share = tmp_path / "share"
    share.mkdir()
    await anyio.run_process(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(share)])
    try:
        kept = note(share / "kept.md", "Kept", "On the share: the numbat.")
        env = {"XDG_DATA_HOME": str(tmp_path / "data"), "MCP_ANALYSIS_WATCH__SETTLE_SECONDS": "0.3", **ROOT_POLL}
        with http_server(tmp_path / "kb.lancedb", "--watch", str(share), env=env, log_dir=tmp_path) as server:
            await eventually(lambda: _has(server, kept), "the start-up mirror")
            before = await ids(server)
            await anyio.run_process(["umount", str(share)])
            gone = f"watched folder {share} is gone; waiting for it (its documents are kept)"
            await eventually(logged(server, gone), "the unmount noticed")
            # A watcher that mirrored the empty folder has done so: polls, the settle time, an apply.
            await anyio.sleep(max(4 * ROOT_POLL_SECONDS, 3.5))
            assert await ids(server) == before
            await anyio.run_process(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(share)])
            note(share / "kept.md", "Kept", "On the share: the numbat.")
            added = note(share / "added.md", "Added", "Written on the share while it was away: the quokka.")
            await eventually(lambda: _has(server, added), "the share mirrored once mounted again")
            assert (await ids(server))[kept.as_uri()] == before[kept.as_uri()]  # unchanged: the same document
    finally:
        await anyio.run_process(["umount", str(share)], check=False)
