"""`mcp-analysis add` on a folder holding a good file and a hostile entry, through the real command line.

Whatever the hostile entry is, the good file goes in, the hostile one is reported under the name it
has in the folder with the reason (for a bound: the bound and the setting raising it), `add` exits 1,
and the ingest lock is free afterwards: the next `add` succeeds.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
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


def add(db: Path, *paths: Path, env: dict[str, str] | None = None) -> tuple[CompletedProcess[str], dict[str, Any]]:
    result = run_cli("--db", str(db), "add", *map(str, paths), "--json", env=env)
    assert result.stdout.strip(), result.stderr
    return result, json.loads(result.stdout)


async def stored_documents(db: Path) -> tuple[list[DocumentMeta], str]:
    """The documents' meta rows, and the content of the first."""
    kb = await KnowledgeBase.open(make_settings(db))
    try:
        metas = await kb.store.all_meta()
        return metas, await kb.corpus().content(metas[0].id)
    finally:
        await kb.close()


async def content_of(db: Path, document_id: str) -> str:
    kb = await KnowledgeBase.open(make_settings(db))
    try:
        return await kb.corpus().content(document_id)
    finally:
        await kb.close()


def assert_lock_is_free(db: Path, folder: Path) -> None:
    later = folder.parent / "later.md"
    later.write_text("# Later\n\nAdded after the hostile file.\n")
    result, report = add(db, later)
    assert result.returncode == 0, result.stderr
    assert len(report["added"]) == 1 and report["skipped"] == []


@dataclass
class Case:
    name: str
    build: Callable[[Path], Path]  # writes the hostile entry into the folder, returns its path
    reason: tuple[str, ...]  # every fragment appears in the reason
    env: dict[str, str] = field(default_factory=dict)


CASES = [
    Case("fifo", lambda d: hostile.fifo(d / "pipe.txt"), ("not a regular file", "named pipe")),
    Case("socket", lambda d: hostile.unix_socket(d / "talk.md"), ("not a regular file", "socket")),
    Case("dev-zero-link", lambda d: hostile.device_link(d / "zero.txt"), ("not a regular file", "character device")),
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
    Case(
        "memory-bound",
        lambda d: hostile.many_tiny_paragraphs_text(d / "words.txt", 3_000_000),
        ("converting it reached the limit of 256 MB", "ingest.max_memory_mb"),
        {"MCP_ANALYSIS_INGEST__MAX_ITEMS": "100000000", "MCP_ANALYSIS_INGEST__MAX_MEMORY_MB": "256"},
    ),
    Case(
        "time-bound",
        lambda d: hostile.nested_html(d / "slow.html", 50_000),
        ("reached the limit of 10 s", "ingest.max_seconds_per_file"),
        {"MCP_ANALYSIS_INGEST__MAX_DEPTH": "100000", "MCP_ANALYSIS_INGEST__MAX_SECONDS_PER_FILE": "10"},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_hostile_entry_is_reported_and_the_good_file_goes_in(tmp_path: Path, case: Case) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "good.md").write_text(hostile.GOOD_TEXT)
    bad = case.build(folder)
    db = tmp_path / "kb.lancedb"

    result, report = add(db, folder, env=case.env)

    assert result.returncode == 1, result.stderr
    assert [Path(uri).name for uri in report["added"]] == ["good.md"]
    reasons = dict(report["skipped"])
    assert str(bad) in reasons, (reasons, result.stderr)  # the name in the folder, not a link's target
    for fragment in case.reason:
        assert fragment in reasons[str(bad)], reasons[str(bad)]
    assert_lock_is_free(db, folder)


def test_a_file_rewritten_after_it_was_read_is_stored_as_read(tmp_path: Path) -> None:
    """An editor saving (truncate + write) between the read and the parse: the stored text and the
    stored hash both come from the bytes that were read, and the next add picks up the new version."""
    folder = tmp_path / "docs"
    folder.mkdir()
    paragraphs = [f"Paragraph {n} of the ledger: cargo {n} tonnes." for n in range(400)]
    original = "# Ledger\n\n" + "\n\n".join(paragraphs) + "\n\nFINAL TOTAL 79800 tonnes.\n"
    ledger = folder / "ledger.md"
    ledger.write_text(original)
    rewritten = "# Ledger\n\n" + "\n\n".join(paragraphs[:203]) + "\n"
    hook = Path(__file__).resolve().parent / "rewrite_hook"
    env = {
        "PYTHONPATH": os.pathsep.join(filter(None, [str(hook), os.environ.get("PYTHONPATH")])),
        "MCP_ANALYSIS_TEST_REWRITE": f"{ledger}={rewritten}",
    }
    db = tmp_path / "kb.lancedb"

    result, report = add(db, folder, env=env)

    assert result.returncode == 0 and len(report["added"]) == 1, result.stderr
    assert ledger.read_text() == rewritten  # the hook did rewrite it after the read
    (meta,), content = anyio.run(stored_documents, db)
    assert meta.content_hash == hashlib.sha256(original.encode()).hexdigest()
    assert "FINAL TOTAL 79800" in content and "Paragraph 399" in content
    again, report = add(db, folder)
    assert again.returncode == 0 and len(report["replaced"]) == 1, again.stderr


def test_a_file_with_a_non_utf8_name_is_added_under_a_lossless_uri(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    named = hostile.non_utf8_name(folder)
    db = tmp_path / "kb.lancedb"

    result, report = add(db, folder)

    assert result.returncode == 0, result.stderr
    assert len(report["added"]) == 1 and report["added"][0].endswith("/docs/caf%E9.md")
    listed = json.loads(run_cli("--db", str(db), "list", "--json").stdout)
    assert listed[0]["uri"] == report["added"][0] and listed[0]["title"] == "Quay Report"
    assert listed[0]["metadata"]["file_name"] == "caf\\xe9.md"
    again, report = add(db, named)
    assert again.returncode == 0 and len(report["unchanged"]) == 1, again.stderr


def test_a_file_that_changes_while_it_is_read_is_refused_until_it_is_stable(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "good.md").write_text(hostile.GOOD_TEXT)
    growing = folder / "growing.md"
    growing.write_text("# Growing\n\nThe first part of a file still being written.\n")
    hook = Path(__file__).resolve().parent / "rewrite_hook"
    env = {
        "PYTHONPATH": os.pathsep.join(filter(None, [str(hook), os.environ.get("PYTHONPATH")])),
        "MCP_ANALYSIS_TEST_GROW": str(growing),
    }
    db = tmp_path / "kb.lancedb"

    result, report = add(db, folder, env=env)

    assert result.returncode == 1, result.stderr
    assert [Path(uri).name for uri in report["added"]] == ["good.md"]
    assert "changed while it was being read" in dict(report["skipped"])[str(growing)]
    again, report = add(db, folder)  # now stable: it goes in, whole
    assert again.returncode == 0 and [Path(uri).name for uri in report["added"]] == ["growing.md"], again.stderr
    metas, _ = anyio.run(stored_documents, db)
    content = anyio.run(content_of, db, next(m.id for m in metas if m.uri.endswith("growing.md")))
    assert "written while the file was being read" in content


def test_a_directory_tree_deeper_than_the_recursion_limit_is_walked(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "good.md").write_text(hostile.GOOD_TEXT)
    bottom = hostile.deep_directories(folder, 1500)
    db = tmp_path / "kb.lancedb"

    result, report = add(db, folder)

    assert result.returncode == 0, result.stderr
    assert sorted(Path(uri).name for uri in report["added"]) == ["bottom.md", "good.md"]
    assert any(uri.endswith("/a/bottom.md") and len(uri) > len(str(bottom)) - 10 for uri in report["added"])
