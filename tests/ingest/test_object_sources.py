"""`add s3://bucket/prefix/`: objects on an object store as sources (moto's S3 server, the real CLI,
real conversion workers, LanceDB on disk): the same bounds and refusals as for files, the same
knowledge base as an add of the same files from a folder, unchanged objects skipped on a rerun."""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli
from tests.ingest.ray.kb_snapshot import assert_same_knowledge_base, moved_to, snapshot
from tests.services import S3, moto_s3


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3]:
    with moto_s3(tmp_path_factory.mktemp("moto")) as started:
        yield started


def add(s3: S3, db: str | Path, *sources: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    done = run_cli("--db", str(db), "add", *sources, "--json", env={**s3.env(), **(env or {})})
    assert done.stdout.startswith("{"), done.stderr[-3000:]
    return done.returncode, json.loads(done.stdout)


def fake_docx() -> bytes:
    """A .docx that is some other zip."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as fake:
        fake.writestr("readme.txt", "not a Word document")
    return buffer.getvalue()


def test_a_prefix_is_added_as_its_objects_under_the_bounds_files_get(s3: S3, tmp_path: Path) -> None:
    """Objects under a prefix (a "subfolder" too) go in; hidden ones are not listed; an object over
    ingest.max_file_mb, a text with a NUL byte, an unknown suffix and a .docx that is another zip are
    skipped by name. The knowledge base is the one a local add of the same files makes; a rerun adds
    nothing; a replaced object replaces its document."""
    good = {
        "log.md": b"# Harbour Log\n\nThe pilot boarded at dawn; crane 4 was repaired.\n",
        "sub/notes.txt": b"Crane 4 is back in service after the gearbox repair.\n",
        "page.html": b"<h1>Berth plan</h1><p>Berth 7 takes the ferry on Mondays.</p>",
    }
    bad = {
        "big.txt": b"A line of a long log.\n" * 2000,
        "nul.txt": b"text\x00more",
        "tool.exe": b"MZ",
        "minutes.docx": fake_docx(),
    }
    hidden = {".secrets/keys.md": b"# Keys\n", "sub/.draft.md": b"# Draft\n"}
    folder = tmp_path / "docs"
    for key, body in {**good, **bad, **hidden}.items():
        s3.put(f"first/{key}", body)
        (folder / key).parent.mkdir(parents=True, exist_ok=True)
        (folder / key).write_bytes(body)
    bounds = {"MCP_ANALYSIS_INGEST__MAX_FILE_MB": "0.02"}
    prefix = f"s3://{s3.bucket}/first"

    code, report = add(s3, tmp_path / "s3.lancedb", prefix + "/", env=bounds)
    assert code == 1
    assert sorted(report["added"]) == sorted(f"{prefix}/{key}" for key in good)
    skipped = dict(report["skipped"])
    assert set(skipped) == {f"{prefix}/{key}" for key in bad}
    assert "ingest.max_file_mb" in skipped[f"{prefix}/big.txt"] and "NUL byte" in skipped[f"{prefix}/nul.txt"]
    assert "unsupported file type '.exe'" in skipped[f"{prefix}/tool.exe"]

    code, local = add(s3, tmp_path / "local.lancedb", str(folder), env=bounds)
    assert code == 1 and len(local["added"]) == len(good)
    expected = moved_to(snapshot(tmp_path / "local.lancedb"), folder.as_uri(), prefix)
    assert_same_knowledge_base(snapshot(tmp_path / "s3.lancedb"), expected)

    code, again = add(s3, tmp_path / "s3.lancedb", prefix + "/", env=bounds)
    assert again["added"] == [] and again["chunks"] == 0 and sorted(again["unchanged"]) == sorted(report["added"])

    s3.put("first/log.md", good["log.md"] + b"\nUpdate: the crane failed again at noon.\n")
    code, changed = add(s3, tmp_path / "s3.lancedb", f"{prefix}/log.md")  # one object, named
    assert code == 0 and changed["replaced"] == [f"{prefix}/log.md"] and changed["added"] == []


def test_a_bucket_that_does_not_exist_stops_the_add_in_one_line(s3: S3, tmp_path: Path) -> None:
    db = tmp_path / "kb.lancedb"
    done = run_cli("--db", str(db), "add", "s3://no-such-bucket/docs/", env=s3.env())
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("error: Cannot list s3://no-such-bucket/docs/: ")
    assert "bucket does not exist" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not list(db.glob("*.lance"))  # nothing written


def test_a_knowledge_base_under_the_prefix_is_never_read_as_documents(s3: S3, tmp_path: Path) -> None:
    """`--db s3://bucket/docs/kb` and `add s3://bucket/docs/`: the knowledge base's own objects are not
    listed (a rerun finds the one document unchanged and nothing else)."""
    s3.put("second/log.md", b"# Harbour Log\n\nThe pilot boarded at dawn.\n")
    db, source = f"s3://{s3.bucket}/second/kb", f"s3://{s3.bucket}/second/"
    assert add(s3, db, source)[1]["added"] == [f"{source}log.md"]
    code, again = add(s3, db, source)
    assert code == 0 and again["unchanged"] == [f"{source}log.md"]
    assert again["added"] == again["skipped"] == again["replaced"] == []
