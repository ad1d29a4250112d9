"""LanceDB table layout, compatible with haiku.rag's (plus a few columns of our own).

- ``documents``       id, content (markdown), docling_document (zstd DoclingDocument JSON)
- ``document_meta``   id, uri, title, metadata (JSON text), created_at, updated_at,
                      content_hash, content_size — the *commit record*: a document is
                      visible exactly when its meta row exists (written last, atomically)
- ``chunks``          id, document_id, content, content_fts, metadata (JSON text), order, vector
- ``document_items``  document_id, position, self_ref, label, text, page_numbers,
                      heading_level, picture_data, chunk_ids
- ``settings``        id, settings (JSON text: schema version, embedder, vector dimension)
- ``document_tables`` document_id, index, self_ref, name, rows, columns, header (JSON text),
                      page_numbers, csv (zstd RFC 4180 text), csv_bytes / csv_chars (its size uncompressed),
                      layout (JSON text: title, notes, header_row, footer, total_rows,
                      truncated): every table's rows (ours only; for other databases tables are
                      read from the stored DoclingDocument). csv_bytes, csv_chars and layout are null in
                      rows written before they existed (the columns are added on the next write)
"""

from __future__ import annotations

import pyarrow as pa

SCHEMA_VERSION = 1

DOCUMENTS = "documents"
DOCUMENT_META = "document_meta"
CHUNKS = "chunks"
DOCUMENT_ITEMS = "document_items"
SETTINGS = "settings"
DOCUMENT_TABLES = "document_tables"
REQUIRED_TABLES = (DOCUMENTS, DOCUMENT_META, CHUNKS, DOCUMENT_ITEMS, SETTINGS)
# document_tables is missing from knowledge bases made before it and from haiku.rag's: their
# tables are read from the stored DoclingDocument (store/tables.py).
TABLES = (*REQUIRED_TABLES, DOCUMENT_TABLES)

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

# The heading level stored for an item that has none (read back as None, store/layout.py). A null there
# would make Lance 2.x store a column of nulls and one level (docling gives PDF headings level 1) as a
# constant plus a validity buffer spanning the data file, which every read of any row decodes whole:
# at a million chunks that doubled the search's items read (bench/heading_level_encoding.py).
NO_HEADING_LEVEL = 0

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

DOCUMENT_TABLES_SCHEMA = pa.schema(
    [
        pa.field("document_id", pa.string(), nullable=False),
        pa.field("index", pa.int32()),
        pa.field("self_ref", pa.string()),
        pa.field("name", pa.string()),
        pa.field("rows", pa.int64()),
        pa.field("columns", pa.int32()),
        pa.field("header", pa.string()),
        pa.field("page_numbers", pa.list_(pa.int32())),
        pa.field("csv", pa.large_binary()),
        pa.field("csv_bytes", pa.int64()),
        pa.field("csv_chars", pa.int64()),
        pa.field("layout", pa.string()),
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
