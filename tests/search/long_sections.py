"""Knowledge base rows written straight to a store: documents of one long section, one chunk each."""

from __future__ import annotations

import json
from typing import Any

from mcp_analysis.store.models import ChunkRecord, DocumentMeta
from mcp_analysis.store.writes import DocumentRows

ITEMS = 200  # one long section of paragraphs per document: windows bound the expansion


def document_rows(doc_id: str, hit_at: int) -> tuple[DocumentRows, ChunkRecord]:
    items = [
        {
            "document_id": doc_id,
            "position": p,
            "self_ref": f"#/texts/{p}",
            "label": "section_header" if p == 0 else "text",
            "text": f"{doc_id} item {p}",
            "page_numbers": [1],
            "heading_level": 1 if p == 0 else None,
            "picture_data": None,
            "chunk_ids": [],
        }
        for p in range(ITEMS)
    ]
    chunk = {
        "id": f"{doc_id}-chunk",
        "document_id": doc_id,
        "content": f"{doc_id} item {hit_at}",
        "content_fts": f"{doc_id} item {hit_at}",
        "metadata": json.dumps({"item_range": [hit_at, hit_at], "section_range": [0, ITEMS - 1], "labels": ["text"]}),
        "order": 0,
        "vector": [1.0, 0.0, 0.0, 0.0],
    }
    return rows_of(doc_id, items, [chunk]), ChunkRecord.from_row(chunk)


def rows_of(doc_id: str, items: list[dict[str, Any]], chunks: list[dict[str, Any]]) -> DocumentRows:
    """A document `doc_id` (file:///{doc_id}.md) with these item and chunk rows, ready to write."""
    meta = DocumentMeta(
        id=doc_id,
        uri=f"file:///{doc_id}.md",
        title=doc_id,
        metadata={},
        created_at="2026-01-01T00:00:00+00:00",
        updated_at="2026-01-01T00:00:00+00:00",
        content_hash=doc_id,
        content_size=1,
    )
    return DocumentRows(meta, {"id": doc_id, "content": "", "docling_document": b""}, items, chunks)
