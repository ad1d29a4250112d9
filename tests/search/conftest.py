"""A knowledge base of near-duplicate licence texts, built once per test run with the real ingest and embedder.

The texts are the five licences of the haiku.rag fixture (GPL-2, GPL-3, LGPL-2.1, MPL-1.1,
MPL-2.0, as docling rendered them to markdown), read from a copy of that database and added
to a new knowledge base of ours as markdown files.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import lancedb
import pytest

from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.ingest.pipeline import Ingestor
from tests.conftest import make_settings, run_lock
from tests.haiku_db import copy_fixture

LICENCES = ("license-GPL-2", "license-GPL-3", "license-LGPL-2.1", "license-MPL-1.1", "license-MPL-2.0")


def write_licences(target: Path, work: Path) -> Path:
    source = copy_fixture(work / "haiku")
    db = lancedb.connect(str(source))
    uris = {r["id"]: r["uri"] for r in db.open_table("document_meta").to_arrow().to_pylist()}
    target.mkdir(parents=True)
    for row in db.open_table("documents").to_arrow().select(["id", "content"]).to_pylist():
        name = uris[row["id"]].rsplit("/", 1)[-1].removesuffix(".txt")
        if name in LICENCES:
            (target / f"{name}.md").write_text(row["content"], encoding="utf-8")
    assert sorted(p.stem for p in target.iterdir()) == sorted(LICENCES)
    return target


def build_kb(db: Path, folder: Path, documents: int) -> Path:
    """A knowledge base at `db` of the files in `folder` (real ingest and embedder), all of them added."""

    async def build() -> None:
        kb = await KnowledgeBase.open(make_settings(db), create=True)
        report = await Ingestor(kb).add([folder])
        assert len(report.added) == documents, report.skipped
        await kb.close()

    anyio.run(build)
    return db


async def kb_opener(db: Path, tmp_path: Path) -> AsyncIterator[Callable[..., Awaitable[KnowledgeBase]]]:
    """open(**search) -> a KnowledgeBase on `db` with those search settings; each closed after the test."""
    opened: list[KnowledgeBase] = []

    async def open_kb(**search: Any) -> KnowledgeBase:
        kb = await KnowledgeBase.open(make_settings(db, sessions={"dir": tmp_path / "s"}, search=search))
        opened.append(kb)
        return kb

    yield open_kb
    for kb in opened:
        await kb.close()


@pytest.fixture(scope="session")
def licences_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Built once per test run, as the sample is: the first xdist worker to need it builds it (embedding
    the five licences costs seconds of CPU), the others wait and find it built. Tests read it only."""
    with run_lock(tmp_path_factory, "licences") as shared:
        work = shared / "licences"
        built = work / "built"
        if not built.exists():
            shutil.rmtree(work, ignore_errors=True)  # what a worker that died mid-build left
            build_kb(work / "licences.lancedb", write_licences(work / "documents", work), len(LICENCES))
            built.touch()
    return work / "licences.lancedb"


@pytest.fixture
async def licences(licences_db: Path, tmp_path: Path) -> AsyncIterator[Any]:
    """open(rerank=...) -> a KnowledgeBase on the licence texts; closed after the test."""
    async for open_kb in kb_opener(licences_db, tmp_path):
        yield open_kb
