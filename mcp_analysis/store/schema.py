"""LanceDB table layout, compatible with haiku.rag's (plus a few columns of our own).

- ``documents``       id, content (markdown), docling_document (zstd DoclingDocument JSON)
- ``document_meta``   id, uri, title, metadata (JSON text), created_at, updated_at,
                      content_hash, content_size — the *commit record*: a document is
                      visible exactly when its meta row exists (written last, atomically)
- ``chunks``          id, document_id, content, content_fts, metadata (JSON text), order, vector
- ``document_items``  document_id, position, self_ref, label, text, page_numbers,
                      heading_level, picture_data, chunk_ids
- ``settings``        id, settings (JSON text: schema version, embedder, vector dimension)
"""

from __future__ import annotations

import pyarrow as pa

SCHEMA_VERSION = 1

DOCUMENTS = "documents"
DOCUMENT_META = "document_meta"
CHUNKS = "chunks"
DOCUMENT_ITEMS = "document_items"
SETTINGS = "settings"
TABLES = (DOCUMENTS, DOCUMENT_META, CHUNKS, DOCUMENT_ITEMS, SETTINGS)

DOCUMENTS_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("content", pa.large_string()),
        pa.field("docling_document", pa.large_binary()),
    ]
)

DOCUMENT_META_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("uri", pa.string()),
        pa.field("title", pa.string()),
        pa.field("metadata", pa.string()),
        pa.field("created_at", pa.string()),
        pa.field("updated_at", pa.string()),
        pa.field("content_hash", pa.string()),
        pa.field("content_size", pa.int64()),
    ]
)

DOCUMENT_ITEMS_SCHEMA = pa.schema(
    [
        pa.field("document_id", pa.string(), nullable=False),
        pa.field("position", pa.int32()),
        pa.field("self_ref", pa.string()),
        pa.field("label", pa.string()),
        pa.field("text", pa.large_string()),
        pa.field("page_numbers", pa.list_(pa.int32())),
        pa.field("heading_level", pa.int32()),
        pa.field("picture_data", pa.large_binary()),
        pa.field("chunk_ids", pa.list_(pa.string())),
    ]
)

SETTINGS_SCHEMA = pa.schema([pa.field("id", pa.string(), nullable=False), pa.field("settings", pa.string())])


def chunks_schema(dimension: int) -> pa.Schema:
    return pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("document_id", pa.string(), nullable=False),
            pa.field("content", pa.large_string()),
            pa.field("content_fts", pa.large_string()),
            pa.field("metadata", pa.string()),
            pa.field("order", pa.int32()),
            pa.field("vector", pa.list_(pa.float32(), dimension)),
        ]
    )
