"""What a conversion adds to a document's metadata (metadata.json, list_documents, filters)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mcp_analysis.ingest.formats.base import Converted

MAX_WARNINGS = 50  # per document; the ingest report lists every one


def conversion_metadata(converted: Converted, tables: int) -> dict[str, Any]:
    """What the file says of itself (e.g. `email` headers), `tables` (how many; the sandbox lists
    tables/{n}.csv from it), `ocr_pages` (pages whose text came from OCR) and `warnings` (what
    could not be read), the last two only when set."""
    out: dict[str, Any] = {**converted.metadata, "tables": tables}
    if converted.ocr_pages:
        out["ocr_pages"] = sorted(converted.ocr_pages)
    if converted.warnings:
        out["warnings"] = converted.warnings[:MAX_WARNINGS]
    return out


def ocr_summary(metas: Sequence[Any], setting: str, shown: int = 20) -> dict[str, Any]:
    """For `info`: the OCR setting and which pages of which documents were read by OCR."""
    read = [(m.uri, m.metadata.get("ocr_pages")) for m in metas if m.metadata.get("ocr_pages")]
    return {
        "setting": setting,
        "documents": len(read),
        "pages": sum(len(pages) for _, pages in read),
        "pages_by_document": dict(read[:shown]),
    }
