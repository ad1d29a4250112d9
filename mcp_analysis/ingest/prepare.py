"""One file's bytes -> everything the store needs of it except embeddings (runs in a conversion worker).

Converting, itemizing, chunking and serialising happen here, in the worker process, so all the
memory and time they take is under the file's bounds; the result is plain data (no docling
objects), cheap to send back and to hold until the batch is written.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import zstandard

from mcp_analysis.errors import IngestError
from mcp_analysis.ingest import formats
from mcp_analysis.ingest.chunker import TOKENIZED_CHARS, ChunkDraft, chunk_items
from mcp_analysis.ingest.formats.base import SNIFF_BYTES, Source, check_items
from mcp_analysis.ingest.formats.metadata import conversion_metadata
from mcp_analysis.ingest.items import ItemDraft, document_title, extract_items, page_title, render_content
from mcp_analysis.ingest.tables import PackedTable, extract_tables, pack_tables


@dataclass
class PreparedFile:
    format: str
    title: str
    content: str
    docling_json: bytes  # zstd-compressed DoclingDocument JSON
    items: list[ItemDraft]
    chunks: list[ChunkDraft]
    warnings: list[str] = field(default_factory=list)
    tables: list[PackedTable] = field(default_factory=list)  # every table's rows, packed
    metadata: dict[str, Any] = field(default_factory=dict)  # what the conversion says (tables, OCR'd pages...)


COUNT_BATCH = 4_096  # texts tokenized at once: the tokenizer's memory grows with the whole batch


def token_counter(tokenizer: Any, chunk_tokens: int) -> Callable[[Sequence[str]], list[int]]:
    """Token counts for the chunker, in bounded memory. The tokenizer encodes a whole text before it
    truncates (about 50 bytes per token), so a 20 MB paragraph (a log without blank lines) would take
    a gigabyte; a text over TOKENIZED_CHARS is counted by its start, scaled to its length, and always
    reported over `chunk_tokens` so the chunker splits it."""

    def count(texts: Sequence[str]) -> list[int]:
        sizes: list[int] = []
        for start in range(0, len(texts), COUNT_BATCH):
            batch = texts[start : start + COUNT_BATCH]
            heads = [text[:TOKENIZED_CHARS] for text in batch]
            encoded = tokenizer.encode_batch(heads, add_special_tokens=False)
            for text, encoding in zip(batch, encoded, strict=True):
                size = len(encoding.ids)
                if len(text) > TOKENIZED_CHARS:
                    size = max(size * len(text) // TOKENIZED_CHARS, chunk_tokens + 1)
                sizes.append(size)
        return sizes

    return count


def prepare(source: Source, tokenizer: Any, chunk_tokens: int) -> PreparedFile:
    """Convert, itemize and chunk `source` (raises IngestError for a file that cannot be used)."""
    converter = formats.for_file(source.name, source.data[:SNIFF_BYTES])
    converted = converter.convert(source)
    items = extract_items(converted.document)
    check_items(source, len(items), "items")
    if not any(it.text.strip() for it in items):
        detail = f" ({'; '.join(converted.warnings)})" if converted.warnings else ""
        raise IngestError(f"no text could be extracted{detail}")

    count = token_counter(tokenizer, chunk_tokens)
    tables = extract_tables(converted.document, converted.tables, source.limits.max_table_chars, converted.warnings)
    by_ref = {t.self_ref: t for t in tables}
    chunks = chunk_items(items, count, chunk_tokens, by_ref, source.limits.max_table_chunks)
    payload = json.dumps(converted.document.export_to_dict(), ensure_ascii=False).encode("utf-8")
    title = document_title(converted.document, items, source.stem)
    metadata = conversion_metadata(converted, len(tables))
    named = page_title(converted.document)
    if named and named != title:
        metadata["page_title"] = named  # what the file calls itself, when its first heading says otherwise
    return PreparedFile(
        format=converted.format,
        title=title,
        content=render_content(items),
        docling_json=zstandard.compress(payload, 6),
        items=items,
        chunks=chunks,
        warnings=converted.warnings,
        tables=pack_tables(tables),
        metadata=metadata,
    )
