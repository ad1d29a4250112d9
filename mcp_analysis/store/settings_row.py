"""The ``settings`` row: which embedder built a database's vectors, and who wrote it.

Every database we serve records this row; store/identify.py reads it to tell our own
databases from haiku.rag's (never by guessing) and writes ours on the first ingest.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

OURS = "mcp-analysis"


@dataclass
class StoredSettings:
    """The settings row, whoever wrote it.

    ``origin`` is "mcp-analysis" (our own, ``schema_version`` >= 1) or the application that
    wrote the database (``origin_version`` is its version string; ``embedder`` is
    "provider:name" as it recorded it).
    """

    schema_version: int
    embedder: str
    vector_dim: int
    created_at: str = ""
    origin: str = OURS
    origin_version: str = ""

    def to_json(self) -> str:
        return json.dumps(
            {
                "version": self.schema_version,
                "embeddings": {"model": self.embedder, "vector_dim": self.vector_dim},
                "created_at": self.created_at,
                "app": OURS,
            }
        )

    @classmethod
    def ours_from(cls, data: dict[str, Any]) -> StoredSettings | None:
        """Our own row (``"app": "mcp-analysis"``), or None when it is not one or is malformed."""
        if data.get("app") != OURS:
            return None
        emb = data.get("embeddings") or {}
        try:
            return cls(
                schema_version=int(data.get("version", 0)),
                embedder=str(emb.get("model", "")),
                vector_dim=int(emb.get("vector_dim", 0)),
                created_at=str(data.get("created_at", "")),
            )
        except (TypeError, ValueError, AttributeError):
            return None
