"""The store names its columns; the ingest hands it what it made (store/rows.py).

A dict written by ingest/ with the keys of a store table's columns would be a second place
where the layout lives: a renamed or added column would then be missed by one engine. The
rows built from real drafts are checked against the tables' schemas too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from mcp_analysis.ingest.chunker import ChunkDraft
from mcp_analysis.ingest.items import ItemDraft
from mcp_analysis.ingest.tables import ExtractedTable, pack_tables
from mcp_analysis.store import rows, schema
from mcp_analysis.store.models import DocumentMeta
from tests.conftest import REPO

TABLE_COLUMNS = {
    name: set(table_schema.names) - {"id"}
    for name, table_schema in (
        (schema.CHUNKS, schema.chunks_schema(4)),
        (schema.DOCUMENT_ITEMS, schema.DOCUMENT_ITEMS_SCHEMA),
        (schema.DOCUMENT_TABLES, schema.DOCUMENT_TABLES_SCHEMA),
        (schema.DOCUMENTS, schema.DOCUMENTS_SCHEMA),
    )
}


def _row_dicts(path: Path) -> list[tuple[int, str, set[str]]]:
    """(line, table, keys) of each dict display whose string keys are 3+ columns of one store table."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Dict):
            keys = {k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
            for table, columns in TABLE_COLUMNS.items():
                if len(keys & columns) >= 3:
                    found.append((node.lineno, table, keys & columns))
    return found


def test_ingest_builds_no_row_of_a_store_table() -> None:
    offenders = [
        f"{path.relative_to(REPO)}:{line} builds a {table} row ({sorted(keys)})"
        for path in sorted((REPO / "mcp_analysis" / "ingest").rglob("*.py"))
        for line, table, keys in _row_dicts(path)
    ]
    assert not offenders, "ingest names store columns; build the rows in store/rows.py:\n" + "\n".join(offenders)


def test_document_rows_fit_the_tables_schemas() -> None:
    meta = DocumentMeta(id="doc", uri="file:///a.md", title="A", metadata={}, created_at="t", updated_at="t")
    items = [
        ItemDraft(0, "#/texts/0", "section_header", "Revenue", heading_level=1),
        ItemDraft(1, "#/texts/1", "text", "up"),
    ]
    chunks = [ChunkDraft(0, "Revenue\nup", ["Revenue"], ["#/texts/0"], ["text"], [], [], (0, 1), (0, 1), [0, 1])]
    table = ExtractedTable(0, "#/tables/0", "sales", 2, ['"region","total"', '"north","3"'], [1])
    built = rows.document_rows(meta, "Revenue\nup", b"{}", items, chunks, pack_tables([table]), np.ones((1, 4)))
    stored = pa.Table.from_pylist(built.chunks, schema=schema.chunks_schema(4))
    assert stored.column("vector").to_pylist() == [[1.0, 1.0, 1.0, 1.0]]
    pa.Table.from_pylist(built.items, schema=schema.DOCUMENT_ITEMS_SCHEMA)
    pa.Table.from_pylist(built.tables, schema=schema.DOCUMENT_TABLES_SCHEMA)
    pa.Table.from_pylist([built.document], schema=schema.DOCUMENTS_SCHEMA)
    chunk_id = built.chunks[0]["id"]
    assert [item["chunk_ids"] for item in built.items] == [[chunk_id], [chunk_id]]
    assert built.tables[0]["csv_bytes"] > 0 and built.tables[0]["name"] == "sales"


@pytest.mark.anyio
async def test_an_item_without_a_heading_level_is_stored_without_a_null_and_read_as_none(tmp_path: Path) -> None:
    """A null beside one level made Lance store the column as a constant plus a validity buffer every
    read decodes whole (bench/heading_level_encoding.py): the store writes NO_HEADING_LEVEL instead,
    and every read gives None back, as before."""
    import lancedb

    from mcp_analysis.store.database import Store

    meta = DocumentMeta(id="doc", uri="file:///a.md", title="A", metadata={}, created_at="t", updated_at="t")
    items = [
        ItemDraft(0, "#/texts/0", "section_header", "Revenue", heading_level=2),
        ItemDraft(1, "#/texts/1", "text", "up"),
        ItemDraft(2, "#/texts/2", "section_header", "Costs"),  # a heading docling gave no level
    ]
    chunks = [ChunkDraft(0, "Revenue\nup", ["Revenue"], ["#/texts/0"], ["text"], [], [], (0, 1), (0, 1), [0, 1])]
    built = rows.document_rows(meta, "Revenue\nup", b"{}", items, chunks, [], np.ones((1, 4)))
    store = await Store.open(tmp_path / "kb.lancedb", create=True)
    try:
        await store.initialize("test", 4)
        await store.write_documents([built])
        assert [i["heading_level"] for i in await store.items("document_id = 'doc'")] == [2, None, None]
        window = await store.item_windows({"doc": [(1, 2)]}, ["position", "heading_level"])
        assert sorted((i["position"], i["heading_level"]) for i in window) == [(1, None), (2, None)]
    finally:
        store.close()
    raw = await (await lancedb.connect_async(tmp_path / "kb.lancedb")).open_table(schema.DOCUMENT_ITEMS)
    column = (await raw.query().select(["heading_level"]).to_arrow()).column("heading_level")
    assert column.null_count == 0 and sorted(column.to_pylist()) == [0, 0, 2]
