"""`mcp-analysis add` on folders holding good files and hostile entries, through the real command line.

Whatever a hostile entry is, the good files go in, the hostile one is reported under the name it
has in the folder with the reason (for a bound: the bound and the setting raising it), `add` exits 1,
and the ingest lock is free afterwards: the next `add` succeeds. One folder holds every entry that
needs no setting changed, so one `add` (module-scoped) serves all their checks.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any

import anyio
import pytest

from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.store.models import DocumentMeta
from tests.conftest import make_settings, run_cli
from tests.ingest import hostile_files as hostile

MB = hostile.MB
HOOK = Path(__file__).resolve().parent / "rewrite_hook"
# The shared add converts every hostile entry in turn (each within its bounds): minutes on a loaded machine.
pytestmark = pytest.mark.timeout(900)


def add(
    db: Path, *paths: Path, env: dict[str, str] | None = None, timeout: float = 300
) -> tuple[CompletedProcess[str], dict[str, Any]]:
    result = run_cli("--db", str(db), "add", *map(str, paths), "--json", env=env, timeout=timeout)
    assert result.stdout.strip(), result.stderr
    return result, json.loads(result.stdout)


async def stored_documents(db: Path) -> list[tuple[DocumentMeta, str]]:
    """Every document's meta row and content."""
    kb = await KnowledgeBase.open(make_settings(db))
    try:
        return [(meta, await kb.corpus().content(meta.id)) for meta in await kb.store.all_meta()]
    finally:
        await kb.close()


def with_hook(**variables: str) -> dict[str, str]:
    """The environment that activates rewrite_hook/sitecustomize.py in the CLI and its workers."""
    path = os.pathsep.join(filter(None, [str(HOOK), os.environ.get("PYTHONPATH")]))
    return {"PYTHONPATH": path, **variables}


def outside_link(link: Path, target: str) -> Path:
    """A link in the folder to a file (a name with a suffix) or folder beside it, holding a secret."""
    path = link.parent.parent / "outside" / target
    if path.suffix:
        path.parent.mkdir(exist_ok=True)
        path.write_text("# Secret\n\nThe vault code is 4711, never to be ingested.\n")
    else:
        path.mkdir(parents=True)
        (path / "inside.md").write_text("# Private\n\nA private note about the vault.\n")
    link.symlink_to(path)
    return link


@dataclass
class Case:
    name: str
    build: Callable[[Path], Path]  # writes the hostile entry into the folder, returns its path
    reason: tuple[str, ...]  # every fragment appears in the reason


CASES = [
    Case("fifo", lambda d: hostile.fifo(d / "pipe.txt"), ("not a regular file", "named pipe")),
    Case("socket", lambda d: hostile.unix_socket(d / "talk.md"), ("not a regular file", "socket")),
    Case("dev-zero-link", lambda d: hostile.device_link(d / "zero.txt"), ("symbolic link", "outside", "not followed")),
    Case(
        "link-to-a-file-outside",  # anyone who can drop a link into the folder would read any file
        lambda d: outside_link(d / "secret-link.md", "secret.md"),
        ("symbolic link to a file outside", "not followed"),
    ),
    Case(
        "link-to-a-folder-outside",
        lambda d: outside_link(d / "elsewhere", "private"),
        ("symbolic link to a folder outside", "not followed"),
    ),
    Case(
        "sparse-300mb",
        lambda d: hostile.sparse_text(d / "huge.txt", 300 * MB),
        ("300 MB", "over the limit of 100 MB", "ingest.max_file_mb"),
    ),
    Case("sparse-under-the-size-bound", lambda d: hostile.sparse_text(d / "nul.txt", 60 * MB), ("binary", "NUL")),
    Case(
        "docx-200k-paragraphs",
        lambda d: hostile.many_paragraphs_docx(d / "tiny.docx", 200_000),
        ("paragraphs", "over the limit of 100,000", "ingest.max_items"),
    ),
    Case(
        "html-nested-100k",
        lambda d: hostile.nested_html(d / "deep.html", 100_000),
        ("nested", "over the limit of 256", "ingest.max_depth"),
    ),
    Case("symlink-loop", lambda d: hostile.symlink_loop(d / "loop.md"), ("symbolic link", "levels")),
    Case("dangling-symlink", lambda d: hostile.dangling_link(d / "gone.md"), ("symbolic link", "does not exist")),
]


@dataclass
class HostileAdd:
    folder: Path
    db: Path
    entries: dict[str, Path]  # case name -> the hostile entry's path
    deep: Path  # a good file 1,500 directories down
    non_utf8: Path  # a good file whose name is not UTF-8
    result: CompletedProcess[str]
    report: dict[str, Any]


@pytest.fixture(scope="module")
def hostile_add(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostileAdd]:
    """One `add` of a folder holding good files beside every hostile entry of CASES."""
    root = tmp_path_factory.mktemp("hostile")
    folder = root / "docs"
    folder.mkdir()
    (folder / "good.md").write_text(hostile.GOOD_TEXT)
    entries = {case.name: case.build(folder) for case in CASES}
    (folder / "again.md").symlink_to(folder / "good.md")  # a link inside: good.md is added once, as itself
    deep = hostile.deep_directories(folder, 1500)
    non_utf8 = hostile.non_utf8_name(folder)
    db = root / "kb.lancedb"
    try:
        result, report = add(db, folder, timeout=840)
        yield HostileAdd(folder, db, entries, deep, non_utf8, result, report)
    finally:
        hostile.remove_deep_directories(folder)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_hostile_entry_is_reported_under_its_name_with_the_reason(hostile_add: HostileAdd, case: Case) -> None:
    reasons = dict(hostile_add.report["skipped"])
    bad = str(hostile_add.entries[case.name])
    assert bad in reasons, (reasons, hostile_add.result.stderr)  # the name in the folder, not a link's target
    for fragment in case.reason:
        assert fragment in reasons[bad], reasons[bad]


def test_the_good_files_beside_hostile_entries_go_in_and_add_exits_1(hostile_add: HostileAdd) -> None:
    assert hostile_add.result.returncode == 1, hostile_add.result.stderr
    added = hostile_add.report["added"]
    assert sorted(Path(uri).name for uri in added) == ["bottom.md", "caf%E9.md", "good.md"]


def test_a_link_inside_the_folder_is_left_to_its_target(hostile_add: HostileAdd) -> None:
    assert str(hostile_add.folder / "again.md") not in dict(hostile_add.report["skipped"])
    assert (hostile_add.folder / "good.md").as_uri() in hostile_add.report["added"]
    assert not [uri for uri in hostile_add.report["added"] if "outside" in uri or "again" in uri]


def test_a_directory_tree_deeper_than_the_recursion_limit_is_walked(hostile_add: HostileAdd) -> None:
    (uri,) = (uri for uri in hostile_add.report["added"] if uri.endswith("/bottom.md"))
    assert uri.endswith("/docs/" + "a/" * 1500 + "bottom.md")


def test_a_file_with_a_non_utf8_name_is_added_under_a_lossless_uri(hostile_add: HostileAdd) -> None:
    (uri,) = (uri for uri in hostile_add.report["added"] if "caf" in uri)
    assert uri.endswith("/docs/caf%E9.md")  # the Latin-1 byte kept, percent-encoded
    stored = {meta.uri: meta for meta, _ in anyio.run(stored_documents, hostile_add.db)}
    assert stored[uri].title == "Quay Report" and stored[uri].metadata["file_name"] == "caf\\xe9.md"


def test_the_ingest_lock_is_free_after_hostile_entries(hostile_add: HostileAdd) -> None:
    """The next add goes through (no read left hanging holds the lock), and it finds the file with the
    non-UTF-8 name unchanged: its uri is the same on every add."""
    later = hostile_add.folder.parent / "later.md"
    later.write_text("# Later\n\nAdded after the hostile files.\n")
    result, report = add(hostile_add.db, later, hostile_add.non_utf8)
    assert result.returncode == 0, result.stderr
    assert [Path(uri).name for uri in report["added"]] == ["later.md"] and report["skipped"] == []
    assert len(report["unchanged"]) == 1


def test_a_file_over_the_memory_bound_is_reported_with_the_bound(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "good.md").write_text(hostile.GOOD_TEXT)
    words = hostile.many_tiny_paragraphs_text(folder / "words.txt", 3_000_000)
    env = {"MCP_ANALYSIS_INGEST__MAX_ITEMS": "100000000", "MCP_ANALYSIS_INGEST__MAX_MEMORY_MB": "256"}

    result, report = add(tmp_path / "kb.lancedb", folder, env=env)

    assert result.returncode == 1, result.stderr
    assert [Path(uri).name for uri in report["added"]] == ["good.md"]
    reason = dict(report["skipped"])[str(words)]
    assert "converting it reached the limit of 256 MB" in reason and "ingest.max_memory_mb" in reason


def test_a_file_is_stored_as_read_and_one_changing_during_the_read_is_refused(tmp_path: Path) -> None:
    """An editor saving (truncate + write) between the read and the parse: the stored text and hash
    both come from the bytes read. A file still growing while it is read is refused, not stored
    half. The next add picks up the new version of the first and the whole of the second."""
    folder = tmp_path / "docs"
    folder.mkdir()
    paragraphs = [f"Paragraph {n} of the ledger: cargo {n} tonnes." for n in range(400)]
    original = "# Ledger\n\n" + "\n\n".join(paragraphs) + "\n\nFINAL TOTAL 79800 tonnes.\n"
    ledger = folder / "ledger.md"
    ledger.write_text(original)
    rewritten = "# Ledger\n\n" + "\n\n".join(paragraphs[:203]) + "\n"
    growing = folder / "growing.md"
    growing.write_text("# Growing\n\nThe first part of a file still being written.\n")
    db = tmp_path / "kb.lancedb"
    env = with_hook(MCP_ANALYSIS_TEST_REWRITE=f"{ledger}={rewritten}", MCP_ANALYSIS_TEST_GROW=str(growing))

    result, report = add(db, folder, env=env)

    assert result.returncode == 1, result.stderr
    assert [Path(uri).name for uri in report["added"]] == ["ledger.md"]
    assert "changed while it was being read" in dict(report["skipped"])[str(growing)]
    assert ledger.read_text() == rewritten  # the hook did rewrite it after the read
    ((meta, content),) = anyio.run(stored_documents, db)
    assert meta.content_hash == hashlib.sha256(original.encode()).hexdigest()
    assert "FINAL TOTAL 79800" in content and "Paragraph 399" in content

    again, report = add(db, folder)  # both stable now

    assert again.returncode == 0, again.stderr
    assert [Path(uri).name for uri in report["replaced"]] == ["ledger.md"]
    assert [Path(uri).name for uri in report["added"]] == ["growing.md"]
    contents = {Path(meta.uri).name: text for meta, text in anyio.run(stored_documents, db)}
    assert "Paragraph 202" in contents["ledger.md"] and "FINAL TOTAL" not in contents["ledger.md"]
    assert "written while the file was being read" in contents["growing.md"]


def test_a_file_that_is_a_link_out_while_its_uri_is_taken_leaves_the_outside_document_alone(tmp_path: Path) -> None:
    """A folder's file swapped back and forth with a link to a file outside: were the uri taken from
    where the link leads and the bytes from the file, its text would be stored over the document
    added from outside (or its document moved out). It is refused as replaced; the next add takes it."""
    folder, outside = tmp_path / "docs", tmp_path / "outside"
    folder.mkdir()
    outside.mkdir()
    official = outside / "report.md"
    official.write_text("# Board report\n\nThe official revenue figure is 10 million.\n")
    db = tmp_path / "kb.lancedb"
    first, _ = add(db, official)
    assert first.returncode == 0, first.stderr
    planted = folder / "report.md"
    planted.write_text("# Board report\n\nPOISONED: wire the revenue to account 666.\n")

    result, report = add(db, folder, env=with_hook(MCP_ANALYSIS_TEST_FLIP=f"{planted}={official}"))

    assert result.returncode == 1, result.stderr
    assert "replaced while it was read" in dict(report["skipped"])[str(planted)]
    assert not report["moved"] and not report["replaced"]
    texts = {meta.uri: text for meta, text in anyio.run(stored_documents, db)}
    assert list(texts) == [official.as_uri()] and "10 million" in texts[official.as_uri()]
    again, report = add(db, folder)
    assert again.returncode == 0, again.stderr
    assert report["added"] == [planted.as_uri()]
    texts = {meta.uri: text for meta, text in anyio.run(stored_documents, db)}
    assert "POISONED" not in texts[official.as_uri()] and "POISONED" in texts[planted.as_uri()]


@pytest.mark.parametrize("where", ["outside/a.md", "docs/.private/a.md"])
def test_a_folder_swapped_for_a_link_between_the_walk_and_the_read_is_refused(tmp_path: Path, where: str) -> None:
    """The link may lead out of the folder, or stay inside it, to what the walk never reads (a
    hidden folder, the server's own files): the file read must be the one the walk found, at its
    real path."""
    folder = tmp_path / "docs"
    innocent = folder / "sub" / "a.md"
    innocent.parent.mkdir(parents=True)
    innocent.write_text(hostile.GOOD_TEXT)
    secret = tmp_path / where  # the same name, elsewhere
    secret.parent.mkdir(parents=True)
    secret.write_text("# Secret\n\nThe vault code is 4711, never to be ingested.\n")
    env = with_hook(MCP_ANALYSIS_TEST_SWAP=f"{innocent}={secret.parent}")

    result, report = add(tmp_path / "kb.lancedb", folder, env=env)

    assert (folder / "sub").is_symlink()  # the hook did swap it right before the read
    assert not [text for _, text in anyio.run(stored_documents, tmp_path / "kb.lancedb") if "4711" in text]
    assert result.returncode == 1, result.stderr
    assert "replaced while it was read" in dict(report["skipped"])[str(innocent)]
