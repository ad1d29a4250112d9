"""Removing many documents at once costs a few table versions, not a few per document.

Through the real CLI (`rm`, `sync`) on a real LanceDB folder: every commit to a table is a
version (on S3, a conditional PUT), so a batch must be one commit per table.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_cli

DOCUMENTS = 12
#: Six tables, a delete each, and slack for the maintenance a change may run afterwards.
MOST_VERSIONS = 14


def versions(db: Path) -> int:
    """Table versions LanceDB has written so far (one manifest each)."""
    return sum(1 for _ in db.glob("*.lance/_versions/*.manifest"))


def notes(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for n in range(DOCUMENTS):
        path = folder / f"note-{n:02d}.md"
        path.write_text(f"# Note {n}\n\nBerth {n} was dredged to {n + 7} metres in the spring survey.\n")
        paths.append(path)
    return paths


def ids(db: Path, env: dict[str, str]) -> list[str]:
    listed = run_cli("--db", str(db), "list", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    return [d["id"] for d in json.loads(listed.stdout)]


def test_rm_removes_several_documents_in_one_commit_per_table(tmp_path: Path) -> None:
    db, env = tmp_path / "kb.lancedb", {"XDG_DATA_HOME": str(tmp_path / "data")}
    notes(tmp_path / "docs")
    assert run_cli("--db", str(db), "add", str(tmp_path / "docs"), env=env).returncode == 0
    known = ids(db, env)
    assert len(known) == DOCUMENTS
    # One unknown reference among them: nothing is removed, and the error names it.
    refused = run_cli("--db", str(db), "rm", *known[:3], "no-such-document", env=env)
    assert refused.returncode != 0 and "no-such-document" in refused.stderr and "Nothing was removed" in refused.stderr
    assert len(ids(db, env)) == DOCUMENTS
    before = versions(db)
    removed = run_cli("--db", str(db), "rm", *known, env=env)
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout.count("removed ") == DOCUMENTS
    assert ids(db, env) == []
    assert versions(db) - before <= MOST_VERSIONS, versions(db) - before


def test_sync_removes_deleted_files_in_one_commit_per_table(tmp_path: Path) -> None:
    db, env = tmp_path / "kb.lancedb", {"XDG_DATA_HOME": str(tmp_path / "data")}
    folder = tmp_path / "watched"
    paths = notes(folder)
    (folder / "kept.md").write_text("# Kept\n\nThe harbour master keeps this one.\n")
    assert run_cli("--db", str(db), "sync", str(folder), env=env).returncode == 0
    assert len(ids(db, env)) == DOCUMENTS + 1
    for path in paths:
        path.unlink()
    before = versions(db)
    result = run_cli("--db", str(db), "sync", str(folder), env=env)
    assert result.returncode == 0, result.stderr
    assert f"{DOCUMENTS} removed" in result.stdout, result.stdout
    assert len(ids(db, env)) == 1
    assert versions(db) - before <= MOST_VERSIONS, versions(db) - before
