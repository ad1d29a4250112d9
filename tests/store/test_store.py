from __future__ import annotations

import re
from pathlib import Path

import pytest

from mcp_analysis.config import Settings
from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.errors import DatabaseMismatchError, DatabaseNotFoundError, FilterError
from mcp_analysis.store.database import Store
from tests.conftest import SAMPLE_DOCUMENTS, make_settings

pytestmark = pytest.mark.anyio

BAD_FILTERS = [
    ("uri LIKE '%a%'; DROP TABLE chunks", "single expression"),
    ("title = 'x' -- comment", "comments"),
    ("id IN (SELECT id FROM chunks)", "subquery"),
    ("nosuchcolumn = 1", "unknown column 'nosuchcolumn'"),
    ("title LIKE", "syntax error"),
    ("title = 'unterminated", "unterminated"),
    ("uri = 'a' OR", "syntax error"),
    ("title = 'x') OR (1 = 1", "unbalanced parentheses"),
    ("(title = 'x'", "unbalanced parentheses"),
]


@pytest.mark.parametrize(("expression", "message"), BAD_FILTERS)
async def test_invalid_filters_are_clear_errors(kb: KnowledgeBase, expression: str, message: str) -> None:
    with pytest.raises(FilterError, match=message):
        await kb.open_corpus(expression)


async def test_valid_filters_scope_documents(kb: KnowledgeBase) -> None:
    everything = await kb.corpus().count()
    advisories = await (await kb.open_corpus("uri LIKE '%advisory%'")).documents()
    assert everything == SAMPLE_DOCUMENTS
    assert len(advisories) == 4
    assert all("advisory" in d.uri for d in advisories)
    combined = await kb.open_corpus("uri LIKE '%advisory%'", "title LIKE '%Phishing%' OR uri LIKE '%phishing%'")
    assert [d.uri.rsplit("/", 1)[-1] for d in await combined.documents()] == ["advisory-2025-04-phishing.txt"]
    # Metadata is JSON text and can be filtered too.
    pdfs = await (await kb.open_corpus('metadata LIKE \'%"format": "pdf"%\'')).documents()
    assert sorted(d.uri.rsplit("/", 1)[-1] for d in pdfs) == [
        "q3-2025-financial-report.pdf",
        "report-a-fleet-operator-survey.pdf",
    ]
    # Parentheses inside string literals do not count.
    assert await (await kb.open_corpus("title LIKE '%(%' OR title LIKE '%)'")).count() == 0
    blank = await kb.open_corpus("   ")  # blank means no filter: every document
    assert blank.filter is None and await blank.count() == everything
    assert (await kb.open_corpus("  ")).filter is None


async def test_missing_database_is_a_clear_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.lancedb"
    with pytest.raises(DatabaseNotFoundError, match=re.escape(f"`mcp-analysis --db {missing} add PATH`")):
        await KnowledgeBase.open(make_settings(missing))
    (tmp_path / "empty.lancedb").mkdir()
    with pytest.raises(DatabaseNotFoundError, match="no knowledge base tables"):
        await KnowledgeBase.open(make_settings(tmp_path / "empty.lancedb"))


async def _db_built_with(path: Path, embedder: str, dimension: int) -> None:
    store = await Store.open(path, create=True)
    await store.initialize(embedder, dimension)
    store.close()


async def test_embedder_dimension_mismatch_says_what_and_how(tmp_path: Path) -> None:
    db = tmp_path / "remote.lancedb"
    await _db_built_with(db, "ollama:nomic-embed-text", 768)
    explicit: Settings = make_settings(db, embedder="onnx:all-MiniLM-L6-v2")
    with pytest.raises(DatabaseMismatchError) as info:
        await KnowledgeBase.open(explicit)
    message = str(info.value)
    assert "ollama:nomic-embed-text" in message and "768-dim" in message
    assert "onnx:all-MiniLM-L6-v2" in message and "384-dim" in message
    assert "unset the `embedder` setting" in message
    # Without an explicit embedder, the database's own embedder is used.
    kb = await KnowledgeBase.open(make_settings(db))
    assert kb.embedder_name == "ollama:nomic-embed-text"
    await kb.close()


async def test_same_dimension_other_model_is_also_refused(tmp_path: Path) -> None:
    db = tmp_path / "other.lancedb"
    await _db_built_with(db, "sentence-transformers:all-MiniLM-L12-v2", 384)
    with pytest.raises(DatabaseMismatchError, match="all-MiniLM-L12-v2"):
        await KnowledgeBase.open(make_settings(db, embedder="onnx:all-MiniLM-L6-v2"))


async def test_indexes_exist_after_ingest(kb: KnowledgeBase) -> None:
    names = await kb.store.index_names()
    assert any("FTS(content_fts)" in n for n in names["chunks"])
    assert any("Bitmap(document_id)" in n for n in names["chunks"])
    assert any("BTree(id)" in n for n in names["document_meta"])
    assert kb.store.settings is not None
    assert kb.store.settings.vector_dim == 384
    assert kb.store.settings.embedder == "onnx:all-MiniLM-L6-v2"
