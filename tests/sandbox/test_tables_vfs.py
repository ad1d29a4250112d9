"""/documents/{id}/tables.json and tables/{n}.csv as sandboxed code sees them, in a real
interpreter: listed without loading, read lazily, filtered, read-only; for a haiku.rag
database (read-only, tables taken from its stored DoclingDocuments) as for our own."""

from __future__ import annotations

import json
from pathlib import Path

import lancedb
import pytest

from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.ingest.pipeline import Ingestor
from mcp_analysis.session.analysis import AnalysisSession
from tests.conftest import make_settings
from tests.docs_factory import write_markdown
from tests.haiku_db import copy_fixture, tree_hashes

pytestmark = pytest.mark.anyio


def _table_rows_of_fixture(db: Path) -> dict[str, list[str]]:
    rows = lancedb.connect(str(db)).open_table("document_items").to_arrow().to_pylist()
    out: dict[str, list[str]] = {}
    for row in rows:
        if row["label"] == "table":
            out.setdefault(row["document_id"], []).append(row["self_ref"])
    return out


async def test_a_haiku_database_serves_tables_from_its_documents_without_a_write(tmp_path: Path) -> None:
    db = copy_fixture(tmp_path / "haiku.lancedb")
    before = tree_hashes(db)
    (doc_id, refs), *_ = _table_rows_of_fixture(db).items()
    kb = await KnowledgeBase.open(make_settings(db, sessions={"dir": tmp_path / "sessions"}))
    try:
        async with AnalysisSession(kb) as session:
            code = f"""
import json, csv
from pathlib import Path
base = Path('/documents/{doc_id}')
entries = json.loads((base / 'tables.json').read_text())
listed = sorted(p.name for p in (base / 'tables').iterdir())
read = [list(csv.reader(Path(e['path']).read_text().splitlines())) for e in entries]
every = len(list(Path('/documents').glob('*/tables/*.csv')))
json.dumps([entries, listed, [r[0] for r in read], [len(r) for r in read], every])
"""
            result = await session.execute(code)
            assert result.success, result.error
            entries, listed, headers, rows, every = json.loads(result.value.strip("'"))
            assert [e["self_ref"] for e in entries] == refs and listed == [f"{i}.csv" for i in range(len(refs))]
            assert [e["header"] for e in entries] == headers and [e["rows"] for e in entries] == rows
            assert max(rows) > 1 and all(e["chunk_ids"] for e in entries)
            assert entries[0]["path"] == f"/documents/{doc_id}/tables/0.csv"
            assert every == sum(len(v) for v in _table_rows_of_fixture(db).values())
            missing = await session.execute(f"open('/documents/{doc_id}/tables/{len(refs)}.csv').read()")
            assert not missing.success and "FileNotFoundError" in missing.error
            write = await session.execute(
                f"from pathlib import Path\nPath('/documents/{doc_id}/tables/0.csv').write_text('x')"
            )
            assert not write.success and "PermissionError" in write.error
    finally:
        await kb.close()
    assert tree_hashes(db) == before


async def test_tables_are_visible_only_through_the_document_filter(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    write_markdown(docs / "log.md")
    (docs / "export.csv").write_text("region,amount\nNorth,10\n", encoding="utf-8")
    kb = await KnowledgeBase.open(make_settings(tmp_path / "kb.lancedb"), create=True)
    try:
        await Ingestor(kb).add([docs])
        metas = {m.metadata["file_name"]: m for m in await kb.corpus().documents()}
        hidden = metas["export.csv"].id
        async with AnalysisSession(kb, filter="uri LIKE '%log.md'") as session:
            code = f"""
from pathlib import Path
seen = sorted(str(p) for p in Path('/documents').glob('*/tables/*.csv'))
try:
    Path('/documents/{hidden}/tables/0.csv').read_text()
    leaked = True
except FileNotFoundError:
    leaked = False
(seen, leaked)
"""
            result = await session.execute(code)
            assert result.success, result.error
            assert result.value == f"(['/documents/{metas['log.md'].id}/tables/0.csv'], False)"
    finally:
        await kb.close()
