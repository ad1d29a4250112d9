"""A haiku.rag database, checked before it is served: its settings row and its tables.

A haiku.rag database is told from ours by its ``settings`` row: ours says
``"app": "mcp-analysis"`` with an integer schema version; haiku.rag's has a version
string (``"0.101.1"``) and an embedder record ``{"provider", "name", "vector_dim"}``
(store/identify.py asks `is_haiku_settings`). Anything else is refused with a message
naming what was found. Layouts older than 0.64 are refused; every table and column we
read must be there, with vectors of the recorded dimension.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mcp_analysis.errors import DatabaseMismatchError
from mcp_analysis.store import schema
from mcp_analysis.store.settings_row import StoredSettings

log = logging.getLogger(__name__)

ORIGIN = "haiku.rag"
TESTED_VERSION = "0.101.1"
# The table layout we read (document_meta split out, keyed by `id`) exists since 0.64.0.
MIN_VERSION = (0, 64, 0)
SUPPORTED = f"haiku.rag databases from 0.64 on (tested with {TESTED_VERSION})"

REQUIRED_COLUMNS: dict[str, tuple[str, ...]] = {
    schema.DOCUMENTS: ("id", "content"),
    schema.DOCUMENT_META: ("id", "uri", "title", "metadata", "created_at", "updated_at"),
    schema.CHUNKS: ("id", "document_id", "content", "content_fts", "metadata", "order", "vector"),
    schema.DOCUMENT_ITEMS: ("document_id", "position", "self_ref", "label", "text", "page_numbers", "heading_level"),
    schema.SETTINGS: ("id", "settings"),
}


@dataclass(frozen=True)
class HaikuEmbedder:
    """The embedder record of a haiku.rag database."""

    provider: str
    name: str
    vector_dim: int
    base_url: str | None = None

    def describe(self) -> str:
        return f"{self.provider} '{self.name}' ({self.vector_dim}-dim vectors)"


def parse_version(text: str) -> tuple[int, int, int] | None:
    match = re.match(r"^\s*v?(\d+)\.(\d+)(?:\.(\d+))?", text)
    if not match:
        return None
    return int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)


def is_haiku_settings(data: dict[str, Any]) -> bool:
    """A haiku.rag settings row: a version string and a nested embedder record, no `app` of ours."""
    model = (data.get("embeddings") or {}).get("model") if isinstance(data.get("embeddings"), dict) else None
    return "app" not in data and isinstance(data.get("version"), str) and isinstance(model, dict)


def embedder_of(data: dict[str, Any], location: str) -> HaikuEmbedder:
    """The embedder record of a haiku.rag settings row (checked)."""
    model = data["embeddings"]["model"]
    provider, name, dim = model.get("provider"), model.get("name"), model.get("vector_dim")
    if not isinstance(provider, str) or not isinstance(name, str) or not isinstance(dim, int) or dim <= 0:
        raise DatabaseMismatchError(
            f"{location}: the haiku.rag settings row has an incomplete embedder record "
            f"{json.dumps(model)[:200]}; expected provider, name and vector_dim."
        )
    base_url = model.get("base_url") if isinstance(model.get("base_url"), str) else None
    return HaikuEmbedder(provider, name, dim, base_url or None)


def check_version(version: str, location: str) -> None:
    """Refuse layouts older than the one we read; note versions newer than the one we tested."""
    parsed = parse_version(version)
    if parsed is None:
        raise DatabaseMismatchError(
            f"{location}: the settings row names haiku.rag version {version!r}, which is not a version number. "
            f"mcp-analysis reads {SUPPORTED}."
        )
    if parsed < MIN_VERSION:
        raise DatabaseMismatchError(
            f"{location} was written by haiku.rag {version}, whose table layout predates 0.64. mcp-analysis reads "
            f"{SUPPORTED}; upgrade the database with haiku.rag itself (`haiku-rag migrate --db {location}`) "
            "and try again."
        )
    tested = parse_version(TESTED_VERSION)
    assert tested is not None
    if parsed[:2] > tested[:2]:
        log.warning(
            "%s was written by haiku.rag %s, newer than the %s mcp-analysis was tested with; its tables have the "
            "columns we read, so it is served, read-only.",
            location,
            version,
            TESTED_VERSION,
        )


def looks_like_haiku(columns: dict[str, Sequence[str]]) -> bool:
    """haiku.rag tables without a settings row: columns only haiku.rag writes."""
    return "tree_depth" in columns.get(schema.DOCUMENT_ITEMS, ()) or "docling_version" in columns.get(
        schema.DOCUMENTS, ()
    )


def check_tables(location: str, version: str, tables: dict[str, Any], schemas: dict[str, Any], dim: int) -> None:
    """Every table and column we read is there, and the vectors have the recorded dimension."""
    missing_tables = [name for name in REQUIRED_COLUMNS if name not in tables]
    if missing_tables:
        raise DatabaseMismatchError(
            f"{location} looks like a haiku.rag {version} knowledge base but lacks the table(s) "
            f"{', '.join(missing_tables)}. mcp-analysis reads {SUPPORTED}."
        )
    missing = [
        f"{name}.{column}"
        for name, columns in REQUIRED_COLUMNS.items()
        for column in columns
        if column not in schemas[name].names
    ]
    if missing:
        raise DatabaseMismatchError(
            f"{location} (haiku.rag {version}) lacks the column(s) {', '.join(missing)}. mcp-analysis reads "
            f"{SUPPORTED}."
        )
    vector = schemas[schema.CHUNKS].field("vector").type
    stored_dim = getattr(vector, "list_size", None)
    if stored_dim != dim:
        raise DatabaseMismatchError(
            f"{location} (haiku.rag {version}): its settings record {dim}-dim vectors but the chunks table holds "
            f"{stored_dim if stored_dim is not None else 'variable-length'} ones; the database is inconsistent. "
            "Rebuild it with haiku.rag (`haiku-rag rebuild`)."
        )


def stored_settings(data: dict[str, Any], location: str) -> StoredSettings:
    """A haiku.rag settings row (see `is_haiku_settings`) as the store's settings record."""
    record = embedder_of(data, location)
    return StoredSettings(
        schema_version=0,
        embedder=f"{record.provider}:{record.name}",
        vector_dim=record.vector_dim,
        origin=ORIGIN,
        origin_version=str(data["version"]),
    )
