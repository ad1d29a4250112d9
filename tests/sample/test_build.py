"""The built-in sample knowledge base: cheap once built, repaired when it drifts."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.ingest.pipeline import Ingestor, remove_document
from mcp_analysis.sample import documents_dir, ensure_sample_kb, forget_build, is_built
from tests.conftest import REPO, make_settings

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
    assert await kb.corpus().count() == 12 + 2 + 1 - 1
    await kb.close()
    forget_build(db)  # what `rm` does
    assert not is_built(db)

    await ensure_sample_kb(settings)

    kb = await KnowledgeBase.open(settings)
    uris = {m.uri for m in await kb.corpus().documents()}
    await kb.close()
    assert uris == {p.resolve().as_uri() for p in documents_dir().iterdir()} | {mine.as_uri()}
    assert is_built(db)
