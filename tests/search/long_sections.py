"""Knowledge base rows written straight to a store: documents of one long section, one chunk each."""

from __future__ import annotations

import json
from typing import Any

from mcp_analysis.store.models import ChunkRecord, DocumentMeta
from mcp_analysis.store.writes import DocumentRows

ITEMS = 200  # one long section of paragraphs per document: windows bound the expansion


def item_row(doc_id: str, position: int, heading_level: int | None, text: str, page: int = 1) -> dict[str, Any]:
    """An item row: a section header when it has a heading level, else a paragraph."""
    return {
        "document_id": doc_id,
        "position": position,
        "self_ref": f"#/texts/{position}",
        "label": "section_header" if heading_level is not None else "text",
        "text": text,
        "page_numbers": [page],
        "heading_level": heading_level,
        "picture_data": None,
        "chunk_ids": [],
    }


def document_rows(doc_id: str, hit_at: int) -> tuple[DocumentRows, ChunkRecord]:
    items = [item_row(doc_id, p, 1 if p == 0 else None, f"{doc_id} item {p}") for p in range(ITEMS)]
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
