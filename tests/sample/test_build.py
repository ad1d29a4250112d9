"""The built-in sample knowledge base: cheap once built, repaired when it drifts."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.ingest.pipeline import Ingestor
from mcp_analysis.ingest.removal import remove_document
from mcp_analysis.sample import STAMP_FILE, documents_dir, ensure_sample_kb, forget_build, is_built
from tests.conftest import REPO, SAMPLE_DOCUMENTS, make_settings
from tools.make_sample_extras import MEMO, WORKBOOK

pytestmark = pytest.mark.anyio

CHECK_WITHOUT_LANCEDB = """
import sys, anyio
from mcp_analysis.config import load_settings
from mcp_analysis.sample import ensure_sample_kb
anyio.run(ensure_sample_kb, load_settings(db=sys.argv[1]))
heavy = ("lancedb", "pyarrow", "mcp_analysis.corpus", "mcp_analysis.ingest.pipeline")
print(sorted(m for m in heavy if m in sys.modules))
"""


def test_a_built_sample_is_checked_without_opening_it(sample_db: Path) -> None:
    """Why `--sample` starts as fast as `--db`: the check reads a stamp, not the database."""
    assert is_built(sample_db)
    run = subprocess.run(
        [sys.executable, "-c", CHECK_WITHOUT_LANCEDB, str(sample_db)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"
    assert run.stderr == ""  # and no progress lines: nothing to build


async def test_a_drifted_sample_is_repaired_and_user_documents_stay(sample_db: Path, tmp_path: Path) -> None:
    db = tmp_path / "sample.lancedb"
    shutil.copytree(sample_db, db)
    settings = make_settings(db)
    # The same data directory used from another clone: its copies of the sample files went in too.
    other_clone = tmp_path / "other" / "mcp_analysis" / "sample" / "documents"
    other_clone.mkdir(parents=True)
    for name in ("advisory-2025-04-phishing.txt", "q1-2025-financial-report.md"):
        shutil.copy(documents_dir() / name, other_clone / name)
    mine = tmp_path / "my-notes.md"
    mine.write_text("# My notes\n\nThe sample is handy for trying queries.\n")
    kb = await KnowledgeBase.open(settings)
    await Ingestor(kb).add([other_clone, mine])
    sample_ids = {m.id for m in await kb.store.all_meta() if m.uri.startswith(documents_dir().as_uri())}
    await remove_document(kb, sorted(sample_ids)[0])  # and one sample document was removed
    assert await kb.corpus().count() == SAMPLE_DOCUMENTS + 2 + 1 - 1
    await kb.close()
    forget_build(db)  # what `rm` does
    assert not is_built(db)

    await ensure_sample_kb(settings)

    kb = await KnowledgeBase.open(settings)
    uris = {m.uri for m in await kb.corpus().documents()}
    await kb.close()
    assert uris == {p.resolve().as_uri() for p in documents_dir().iterdir()} | {mine.as_uri()}
    assert is_built(db)


async def test_a_sample_built_before_the_workbook_and_scan_gains_them(sample_db: Path, tmp_path: Path) -> None:
    """Users who built the sample when it had neither file get both on their next start,
    the scan read by OCR even where they turned OCR off for their own documents."""
    db = tmp_path / "sample.lancedb"
    shutil.copytree(sample_db, db)
    settings = make_settings(db, ingest={"ocr": "off"})
    newer = {(documents_dir() / name).resolve().as_uri() for name in (MEMO, WORKBOOK)}
    kb = await KnowledgeBase.open(settings)
    for meta in await kb.store.all_meta():
        if meta.uri in newer:
            await remove_document(kb, meta.id)
    await kb.close()
    stamp = json.loads((db / STAMP_FILE).read_text())
    for name in (MEMO, WORKBOOK):
        del stamp["files"][name]  # the stamp that build wrote: the files it was built from
    (db / STAMP_FILE).write_text(json.dumps(stamp))
    assert not is_built(db)

    await ensure_sample_kb(settings)

    assert is_built(db)
    kb = await KnowledgeBase.open(settings)
    metas = {m.uri: m for m in await kb.store.all_meta()}
    await kb.close()
    assert len(metas) == SAMPLE_DOCUMENTS and newer <= set(metas)
    memo = metas[(documents_dir() / MEMO).resolve().as_uri()]
    assert memo.metadata["ocr_pages"] == [1]
