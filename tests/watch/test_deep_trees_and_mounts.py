"""Folders a writer to the share can make, and shares that come and go, through the real command line.

A tree nested past PATH_MAX (anyone who can write into a folder can make one with relative names)
is named as unreadable and everything else is mirrored: `sync` does its work, `serve --watch`
starts and keeps following. A share mounted on a folder under a synced one, once unmounted, keeps
its documents (the same ids when it is back); the folder removed, they go. Every wait is a poll
against a deadline, never a fixed sleep.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import anyio
import pytest

from mcp_analysis.corpus import KnowledgeBase
from tests.conftest import make_settings, run_cli
from tests.mcp_helpers import http_server
from tests.watch.polling import eventually
from tests.watch.test_escapes import ROOT_POLL, ids, listed, logged, note

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(600)]


def deep_tree(top: Path, past: int = 4300) -> Path:
    """Folders of 200-byte names under `top`, down past `past` bytes of path, a note at the bottom:
    made with names relative to an open folder, as a writer without long paths would. Returns the
    first folder of the chain."""
    top.mkdir(parents=True, exist_ok=True)
    fd = os.open(top, os.O_RDONLY)
    length = len(os.fspath(top))
    try:
        while length < past:
            os.mkdir("d" * 200, dir_fd=fd)
            inner = os.open("d" * 200, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd, length = inner, length + 201
        written = os.open("deep.md", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(written, b"# Deep\n\nA note past PATH_MAX.\n")
        os.close(written)
    finally:
        os.close(fd)
    return top / ("d" * 200)


def remove_deep(first: Path) -> None:
    """Remove a chain `deep_tree` made (rm -r would need its long paths)."""
    subprocess.run(["rm", "-rf", "--one-file-system", first.name], cwd=first.parent, check=True)


def test_sync_and_add_of_a_folder_with_a_tree_past_path_max_name_it_and_do_the_rest(tmp_path: Path) -> None:
    """The tree, and a link whose target's name is too long to look at, are named; the rest is read."""
    folder, db = tmp_path / "share", tmp_path / "kb.lancedb"
    note(folder / "top.md", "Top", "The lighthouse keeper counts albatrosses.")
    deep = deep_tree(folder)
    (folder / "far").symlink_to("x" * 300)
    env = {"XDG_DATA_HOME": str(tmp_path / "data")}
    try:
        done = run_cli("--db", str(db), "sync", str(folder), env=env)
        assert "unexpected" not in done.stderr and "Traceback" not in done.stderr, done.stderr[-2000:]
        assert "1 added" in done.stdout and "2 failed" in done.stdout, done.stdout[-500:]
        said = " ".join((done.stdout + done.stderr).split())
        assert f"{deep}/" in said and "could not be read (File name too long): its documents are kept" in said
        assert f"{folder / 'far'}: a symbolic link whose target cannot be looked at (File name too long)" in said
        note(folder / "later.md", "Later", "Written after the first sync.")
        again = run_cli("--db", str(db), "sync", str(folder), env=env)
        assert "1 added" in again.stdout and "1 unchanged" in again.stdout, again.stdout[-500:]
        added = run_cli("--db", str(tmp_path / "added.lancedb"), "add", str(folder), env=env)
        assert "Traceback" not in added.stderr and "2 added" in added.stdout, added.stderr[-2000:]
        assert "a symbolic link whose target cannot be looked at" in " ".join((added.stdout + added.stderr).split())
    finally:
        remove_deep(deep)


async def test_a_watcher_starts_beside_a_tree_past_path_max_and_follows_changes_next_to_a_new_one(
    tmp_path: Path,
) -> None:
    folder, db = tmp_path / "share", tmp_path / "kb.lancedb"
    start = note(folder / "x" / "a.md", "A", "Seals on the rocks.")
    deep = [deep_tree(folder / "y")]
    env = {"XDG_DATA_HOME": str(tmp_path / "data"), "MCP_ANALYSIS_WATCH__SETTLE_SECONDS": "0.3", **ROOT_POLL}
    try:
        with http_server(db, "--watch", str(folder), env=env, log_dir=tmp_path) as server:
            await eventually(lambda: _has(server, start), "the start-up mirror")
            deep.append(deep_tree(folder / "z"))  # events for its paths come with the next file's
            later = note(folder / "b.md", "B", "Skuas over the harbour.")
            await eventually(lambda: _has(server, later), "a file written beside a new tree past PATH_MAX")
            assert server.process.poll() is None
            assert "could not apply changes" not in server.log.read_text(errors="replace")
    finally:
        for first in deep:
            remove_deep(first)


async def test_a_share_unmounted_under_a_synced_folder_keeps_its_documents_until_its_folder_goes(
    tmp_path: Path,
) -> None:
    folder, db = tmp_path / "w", tmp_path / "kb.lancedb"
    share = folder / "share"
    share.mkdir(parents=True)
    (share / ".not-mounted").write_text("")  # a marker under the mount point: no file of its own
    note(folder / "local.md", "Local", "A local note about terns.")
    env = {"XDG_DATA_HOME": str(tmp_path / "data")}

    def shared_notes() -> list[Path]:
        return [note(share / f"s{i}.md", f"Shared {i}", f"Shared note {i} about gannets.") for i in range(3)]

    async def sync() -> str:
        done = await anyio.to_thread.run_sync(lambda: run_cli("--db", str(db), "sync", str(folder), env=env))
        assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stderr[-2000:]
        return " ".join((done.stdout + done.stderr).split())

    mount = ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(share)]
    await anyio.run_process(mount)
    try:
        on_share = shared_notes()
        assert "4 added" in await sync()
        before = await ids_in(db)
        await anyio.run_process(["umount", str(share)])
        said = await sync()  # a new process: it knows the mount point from the sync before
        assert "0 removed" in said and f"{share}: could not be read (nothing is mounted on it)" in said, said
        assert await ids_in(db) == before
        await anyio.run_process(mount)
        shared_notes()
        assert "4 unchanged" in await sync()
        assert await ids_in(db) == before  # the same documents, not new ones
        await anyio.run_process(["umount", str(share)])
        (share / ".not-mounted").unlink()
        share.rmdir()  # the share given up: its folder gone, its documents go
        said = await sync()
        assert "3 removed" in said, said
        assert set(await ids_in(db)) == {(folder / "local.md").as_uri()}
        assert all(p.as_uri() in before for p in on_share)
    finally:
        await anyio.run_process(["umount", str(share)], check=False)


async def ids_in(db: Path) -> dict[str, str]:
    """{uri: id} of the knowledge base's documents."""
    kb = await KnowledgeBase.open(make_settings(db))
    try:
        return {m.uri: m.id for m in await kb.store.all_meta()}
    finally:
        await kb.close()


async def _has(server: object, path: Path) -> bool:
    return path.as_uri() in await listed(server)  # type: ignore[arg-type]


async def test_a_watcher_follows_a_share_unmounted_and_mounted_again_under_its_folder(tmp_path: Path) -> None:
    """Unmounted: its documents stay. Mounted again: watched anew (the OS watches went with the old
    mount), so files deleted and written on it afterwards reach the knowledge base."""
    folder, db = tmp_path / "w", tmp_path / "kb.lancedb"
    share = folder / "share"
    share.mkdir(parents=True)
    mount = ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(share)]
    await anyio.run_process(mount)
    env = {"XDG_DATA_HOME": str(tmp_path / "data"), "MCP_ANALYSIS_WATCH__SETTLE_SECONDS": "0.3", **ROOT_POLL}
    try:
        first = note(share / "s1.md", "Shared 1", "Gannets on the stack.")
        with http_server(db, "--watch", str(folder), env=env, log_dir=tmp_path) as server:
            await eventually(lambda: _has(server, first), "the start-up mirror")
            before = await ids(server)
            await anyio.run_process(["umount", str(share)])
            await eventually(logged(server, f"unmounted from {share}; watching it anew"), "the unmount noticed")
            kept = f"{share}: could not be read (nothing is mounted on it): its documents are kept"
            await eventually(logged(server, kept), "the share's documents kept")
            assert await ids(server) == before
            await anyio.run_process(mount)
            note(share / "s1.md", "Shared 1", "Gannets on the stack.")  # the share's files, back
            later = note(share / "s2.md", "Shared 2", "Puffins in the burrows.")
            await eventually(logged(server, f"was mounted on {share}"), "the mount noticed")
            await eventually(lambda: _has(server, later), "a file written on the share mounted again")
            assert (await ids(server))[first.as_uri()] == before[first.as_uri()]  # the same document
            first.unlink()
            await eventually(lambda: _lacks(server, first), "a file deleted from the share mounted again")
    finally:
        await anyio.run_process(["umount", str(share)], check=False)


async def _lacks(server: object, path: Path) -> bool:
    return not await _has(server, path)
