"""A converted document and its vectors as the rows of the store's tables.

The one place where ingest's drafts (chunks, items, packed tables) meet the store's column
names (schema.py): the ingest hands the store what it made, and every engine (a local add, a
Ray actor) gets the same rows from here. Chunk ids are made here, and every item lists the
chunks that hold it.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from mcp_analysis.store import schema
from mcp_analysis.store.models import DocumentMeta
from mcp_analysis.store.writes import DocumentRows

if TYPE_CHECKING:
    from mcp_analysis.ingest.chunker import ChunkDraft
    from mcp_analysis.ingest.items import ItemDraft
    from mcp_analysis.ingest.tables import PackedTable


def document_rows(
    meta: DocumentMeta,
    content: str,
    docling_json: bytes,
    items: Sequence[ItemDraft],
    chunks: Sequence[ChunkDraft],
    tables: Sequence[PackedTable],
    vectors: Any,
) -> DocumentRows:
    """The rows of one document; `vectors`: its chunks' embeddings, in order (one row each)."""
    doc_id = meta.id
    # Each row holds its vector as a float32 view of one matrix: Arrow copies it as one buffer, where a
    # Python list of floats is converted number by number (bench/rows.py measures both).
    matrix = np.asarray(vectors, dtype=np.float32)
    chunk_rows = []
    item_chunks: dict[int, list[str]] = {}
    for chunk, vector in zip(chunks, matrix, strict=True):
        chunk_id = str(uuid.uuid4())
        for position in chunk.item_positions:
            item_chunks.setdefault(position, []).append(chunk_id)
        chunk_rows.append(
            {
                "id": chunk_id,
                "document_id": doc_id,
                "content": chunk.content,
                "content_fts": chunk.fts_text,
                "metadata": json.dumps(chunk.metadata(), ensure_ascii=False),
                "order": chunk.order,
                "vector": vector,
            }
        )
    item_rows = [
        {
            **dataclasses.asdict(item),
            "heading_level": schema.NO_HEADING_LEVEL if item.heading_level is None else item.heading_level,
            "document_id": doc_id,
            "picture_data": None,
            "chunk_ids": item_chunks.get(item.position, []),
        }
        for item in items
    ]
    document_row = {"id": doc_id, "content": content, "docling_document": docling_json}
    return DocumentRows(meta, document_row, item_rows, chunk_rows, [table_row(doc_id, t) for t in tables])


def table_row(doc_id: str, table: PackedTable) -> dict[str, Any]:
    """A ``document_tables`` row: the table's description, its compressed CSV and the sizes a read checks."""
    return {
        "document_id": doc_id,
        "index": table.index,
        "self_ref": table.self_ref,
        "name": table.name,
        "rows": table.rows,
        "columns": table.columns,
        "header": json.dumps(table.header, ensure_ascii=False),
        "page_numbers": table.page_numbers,
        "csv": table.csv,
        "csv_bytes": table.csv_bytes,
        "csv_chars": table.csv_chars,  # checked before a read decompresses it
        "layout": json.dumps(table.layout, ensure_ascii=False),
    }
