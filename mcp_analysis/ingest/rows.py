"""A converted document and its vectors -> the rows the store writes for it.

One function for every engine: a local add builds the rows in its own process; a Ray ingest in
the actors that embed and write them (ray_tasks.py): the same rows either way.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from mcp_analysis.ingest.chunker import ChunkDraft
from mcp_analysis.ingest.items import ItemDraft
from mcp_analysis.ingest.sources import SourcePath
from mcp_analysis.store.models import DocumentMeta
from mcp_analysis.store.writes import DocumentRows


@dataclass
class PreparedDocument:
    """A converted file with its document's metadata, waiting in a batch to be embedded and written."""

    path: SourcePath
    meta: DocumentMeta
    content: str
    docling_json: bytes
    items: list[ItemDraft]
    chunks: list[ChunkDraft]
    replacing: bool
    tables: list[dict[str, Any]] = field(default_factory=list)  # document_tables rows without the document id


def document_rows(prepared: PreparedDocument, vectors: Any) -> DocumentRows:
    """The rows of one document; `vectors`: its chunks' embeddings, in order."""
    doc_id = prepared.meta.id
    chunk_rows = []
    item_chunks: dict[int, list[str]] = {}
    for chunk, vector in zip(prepared.chunks, vectors, strict=True):
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
                "vector": vector.tolist(),
            }
        )
    item_rows = [
        {
            **dataclasses.asdict(it),
            "document_id": doc_id,
            "picture_data": None,
            "chunk_ids": item_chunks.get(it.position, []),
        }
        for it in prepared.items
    ]
    document_row = {"id": doc_id, "content": prepared.content, "docling_document": prepared.docling_json}
    tables = [{"document_id": doc_id, **row} for row in prepared.tables]
    return DocumentRows(prepared.meta, document_row, item_rows, chunk_rows, tables)
