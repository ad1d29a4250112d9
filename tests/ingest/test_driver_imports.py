"""What the processes that never convert a file import: an `add`'s driver (conversion runs in its
workers), a Ray task's worker (it hands the file to its conversion worker) and a server's store.
Docling (and pandas with it) is the conversion worker's to import: each of these processes would
pay its import time and memory for nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

CONVERSION_ONLY = ("docling", "docling_core", "pandas")

PROGRAM = f"""
import json, sys
import mcp_analysis.ingest.pipeline, mcp_analysis.ingest.ray_engine, mcp_analysis.ingest.ray_tasks
import mcp_analysis.store.tables, mcp_analysis.corpus
print(json.dumps(sorted(m for m in {CONVERSION_ONLY!r} if m in sys.modules)))
"""


def test_an_add_converts_in_its_worker_and_imports_no_docling_itself(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "log.md").write_text("# Harbour Log\n\n| Berth | Ship |\n|---|---|\n| 4 | Aurora |\n")
    command = [sys.executable, "-X", "importtime", "-m", "mcp_analysis", "--db", str(tmp_path / "kb"), "add"]
    done = subprocess.run(
        [*command, str(folder), "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)["added"] == [(folder / "log.md").as_uri()]  # converted, table and all
    # -X importtime: one line per module this process imported (its workers are started without it).
    imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert imported, done.stderr[-2000:]
    assert sorted(m for m in imported if m.split(".")[0] in ("docling", "docling_core")) == []


def test_the_ray_engine_and_the_store_import_no_docling() -> None:
    run = subprocess.run([sys.executable, "-c", PROGRAM], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == []
