"""Rows as the layers above see them."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field

# Metadata ingest records itself (the uri shows the file name already).
INGEST_METADATA = ("format", "file_name", "tables", "ocr_pages", "warnings", "email", "page_title")


class DocumentMeta(BaseModel):
    """What we know about a document without loading it."""

    id: str
    uri: str
    title: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: str
    updated_at: str
    content_hash: str = ""
    content_size: int = 0

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> DocumentMeta:
        raw = row.get("metadata") or "{}"
        try:
            metadata = json.loads(raw)
        except json.JSONDecodeError:
            metadata = {"raw": raw}
        return cls(
            id=row["id"],
            uri=row.get("uri") or "",
            title=row.get("title") or "",
            metadata=metadata if isinstance(metadata, dict) else {"value": metadata},
            created_at=row.get("created_at") or "",
            updated_at=row.get("updated_at") or "",
            content_hash=row.get("content_hash") or "",
            content_size=int(row.get("content_size") or 0),
        )

    def to_row(self) -> dict[str, Any]:
        row = self.model_dump()
        row["metadata"] = json.dumps(self.metadata, ensure_ascii=False, sort_keys=True)
        return row

    def user_metadata(self) -> dict[str, Any]:
        """The metadata users gave (--meta, the Python API), without what ingest records itself."""
        return {k: v for k, v in self.metadata.items() if k not in INGEST_METADATA}

    def public(self) -> dict[str, Any]:
        """The fields shown to users and sandboxed code (metadata.json, list_documents)."""
        return {
            "id": self.id,
            "title": self.title,
            "uri": self.uri,
            "created_at": self.created_at,
            "metadata": self.metadata,
        }


class DocumentItem(BaseModel):
    """One docling item (paragraph, heading, table, ...) in document order."""

    document_id: str
    position: int
    self_ref: str
    label: str
    text: str
    page_numbers: list[int] = Field(default_factory=list)
    heading_level: int | None = None
    chunk_ids: list[str] = Field(default_factory=list)

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> DocumentItem:
        return cls(
            document_id=row["document_id"],
            position=int(row["position"]),
            self_ref=row.get("self_ref") or "",
            label=row.get("label") or "text",
            text=row.get("text") or "",
            page_numbers=list(row.get("page_numbers") or []),
            heading_level=row.get("heading_level"),
            chunk_ids=list(row.get("chunk_ids") or []),
        )


class ChunkRecord(BaseModel):
    """A stored chunk without its vector."""

    id: str
    document_id: str
    content: str
    order: int
    headings: list[str] = Field(default_factory=list)
    doc_item_refs: list[str] = Field(default_factory=list)
    labels: list[str] = Field(default_factory=list)
    page_numbers: list[int] = Field(default_factory=list)
    picture_refs: list[str] = Field(default_factory=list)
    item_range: tuple[int, int] = (0, 0)
    section_range: tuple[int, int] = (0, 0)

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> ChunkRecord:
        meta = json.loads(row.get("metadata") or "{}")
        return cls(
            id=row["id"],
            document_id=row["document_id"],
            content=row.get("content") or "",
            order=int(row.get("order") or 0),
            headings=meta.get("headings") or [],
            doc_item_refs=meta.get("doc_item_refs") or [],
            labels=meta.get("labels") or [],
            page_numbers=meta.get("page_numbers") or [],
            picture_refs=meta.get("picture_refs") or [],
            item_range=tuple(meta.get("item_range") or (0, 0)),
            section_range=tuple(meta.get("section_range") or (0, 0)),
        )
