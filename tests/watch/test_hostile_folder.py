"""A watched folder as a messy or hostile user leaves it: the knowledge base inside it, loops,
pipes, dangling links, files gone before they are read, names that are not UTF-8.

One watcher (real store, real conversion workers, real OS events) lives through every case in turn.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_analysis.ingest.files import file_uri
from mcp_analysis.watch.follow import FolderWatcher
from mcp_analysis.watch.run import open_mirror
from mcp_analysis.watch.undecodable import path_in_error
from tests.conftest import make_settings

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(600)]

DEADLINE = 240.0  # seconds; only reached when something is broken


def note(path: Path, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# {path.stem}\n\n{body}\n")


async def test_a_hostile_folder_with_the_knowledge_base_inside_is_followed_without_its_own_files(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "folder"
    kb = folder / "kb.lancedb"  # the knowledge base inside the folder it mirrors
    note(folder / "first.md", "The okapi is present at start.")
    settings = make_settings(kb, watch={"settle_seconds": 0.2, "debounce_seconds": 0.1})
    mirror = await open_mirror(settings, [folder])
    applied: list[Path] = []
    real_apply = mirror.apply

    async def recording_apply(paths: Any) -> Any:
        paths = list(paths)
        applied.extend(paths)
        return await real_apply(paths)

    mirror.apply = recording_apply  # type: ignore[method-assign]
    watcher = FolderWatcher(mirror, settings.watch)

    async def names() -> set[str]:
        return {m.uri for m in await mirror.kb.store.all_meta()}

    async def until(expected: set[str]) -> None:
        seen: set[str] = set()
        with anyio.move_on_after(DEADLINE):
            while (seen := await names()) != expected:  # noqa: ASYNC110 - polling the store, no event to wait on
                await anyio.sleep(0.2)
        assert seen == expected

    try:
        async with anyio.create_task_group() as tg:
            await tg.start(watcher.run)
            assert kb.is_dir() and await names() == {file_uri(folder / "first.md")}  # none of the store's own files

            (folder / "loop").symlink_to(folder / "loop")  # a link to itself
            (folder / "sub").mkdir()
            (folder / "sub" / "up").symlink_to(folder / "sub")  # a folder linked inside itself
            (folder / "dangling.md").symlink_to("/nonexistent/target.md")
            os.mkfifo(folder / "pipe.md")  # would block a reader forever
            for i in range(20):  # each gone before the watcher reads it
                note(folder / f"flash{i}.md", "gone at once")
                (folder / f"flash{i}.md").unlink()
            latin1 = os.fsencode(folder) + b"/caf\xe9-latin1.md"
            with open(latin1, "w") as handle:
                handle.write("# Latin-1 name\n\nThe quokka has a name that is not UTF-8.\n")
            note(folder / "sub" / "ünïcødé 名前.md", "The kiwi has a unicode name.")  # with spaces
            unicode = folder / "sub" / "ünïcødé 名前.md"
            expected = {file_uri(p) for p in (folder / "first.md", os.fsdecode(latin1), unicode)}
            await until(expected)

            note(folder / "first.md", "The okapi was rewritten: now a pangolin.")  # the watcher still follows
            with anyio.fail_after(DEADLINE):
                while not any("pangolin" in c for c in await _contents(mirror)):  # noqa: ASYNC110
                    await anyio.sleep(0.2)
            assert await names() == expected
            tg.cancel_scope.cancel()
        assert applied and not [p for p in applied if p == kb or p.is_relative_to(kb)]
    finally:
        await mirror.kb.close()


async def _contents(mirror: Any) -> list[str]:
    metas = await mirror.kb.store.all_meta()
    return list((await mirror.kb.store.documents_content([m.id for m in metas])).values())


def test_the_path_in_a_watcher_error_is_read_back_byte_for_byte() -> None:
    message = r'Unable to decode path "/data/caf\xE9 \"q\" \\ \u{1f600}.md" to string'
    assert os.fsencode(path_in_error(message) or "") == b'/data/caf\xe9 "q" \\ \xf0\x9f\x98\x80.md'
    assert path_in_error("some other failure") is None


async def test_a_file_that_became_a_private_key_loses_its_document_and_keys_are_never_followed(
    tmp_path: Path,
) -> None:
    """ingest/secrets.py: a document whose file is now a key (or was added before keys were refused)
    goes at the next sync; a key's well-known name is never followed."""
    from mcp_analysis.watch.run import close_mirror

    folder = tmp_path / "folder"
    note(folder / "a.md", "The okapi stays.")
    note(folder / "deploy", "Deploy notes, for now.")
    mirror = await open_mirror(make_settings(tmp_path / "kb.lancedb"), [folder])
    try:
        first = await mirror.apply([folder])
        assert sorted(first.added) == sorted(file_uri(folder / n) for n in ("a.md", "deploy")), first
        (folder / "deploy").write_text("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n")
        (folder / "id_ed25519").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nb3Bl\n")
        (folder / "credentials").write_text("[default]\naws_secret_access_key = xyz\n")
        second = await mirror.apply([folder])
        assert second.removed == [file_uri(folder / "deploy")], second
        assert [reason for _, reason in second.failed] == [
            "it is a private key (it begins with -----BEGIN RSA PRIVATE KEY-----): secrets are never added as documents"
        ]
        assert {m.uri for m in await mirror.kb.store.all_meta()} == {file_uri(folder / "a.md")}
    finally:
        await close_mirror(mirror)


async def test_a_document_added_by_hand_from_a_path_the_rules_leave_out_stays_until_its_file_goes(
    tmp_path: Path,
) -> None:
    """`add W/.private/plan.md` (hidden) or a file under an ignored folder: the mirror does not follow
    them, but their files are not gone, so their documents are not stale; a deleted one's goes."""
    from mcp_analysis.ingest.pipeline import Ingestor
    from mcp_analysis.watch.run import close_mirror

    folder = tmp_path / "folder"
    note(folder / "a.md", "The okapi stays.")
    by_hand = [folder / ".private" / "plan.md", folder / "drafts" / "draft.md", folder / ".private" / "old.md"]
    for path in by_hand:
        note(path, f"Added by hand: {path.stem}.")
    settings = make_settings(tmp_path / "kb.lancedb", watch={"ignore": ["drafts/"]})
    mirror = await open_mirror(settings, [folder])
    try:
        added = await Ingestor(mirror.kb, pool=mirror.pool).add(by_hand)
        assert sorted(added.added) == sorted(file_uri(p) for p in by_hand), added
        first = await mirror.apply([folder])
        assert first.added == [file_uri(folder / "a.md")] and not first.removed, first
        by_hand[2].unlink()
        second = await mirror.apply([folder])
        assert second.removed == [file_uri(by_hand[2])], second
        assert {m.uri for m in await mirror.kb.store.all_meta()} == {
            file_uri(p) for p in (folder / "a.md", *by_hand[:2])
        }
    finally:
        await close_mirror(mirror)
