"""A prepared document, waiting in a batch, and the rows the store writes for it.

One function for every engine: a local add builds the rows in its own process; a Ray ingest in
the actors that embed and write them (ray_tasks.py): the same rows either way. The store names
the columns (store/rows.py); the ingest only hands over what it made.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mcp_analysis.ingest.chunker import ChunkDraft
from mcp_analysis.ingest.items import ItemDraft
from mcp_analysis.ingest.sources import SourcePath
from mcp_analysis.ingest.tables import PackedTable
from mcp_analysis.store import rows
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
    tables: list[PackedTable] = field(default_factory=list)


def document_rows(prepared: PreparedDocument, vectors: Any) -> DocumentRows:
    """The rows of one document; `vectors`: its chunks' embeddings, in order."""
    return rows.document_rows(
        prepared.meta,
        prepared.content,
        prepared.docling_json,
        prepared.items,
        prepared.chunks,
        prepared.tables,
        vectors,
    )
