"""The store's layout adapter: how a database's rows become the rows the layers above read.

The `Store` queries tables by our schema's names and hands what it read to its layout,
which turns the rows into ours. Our own databases are read as they are (`OwnLayout`, a
pass-through); a database another application wrote has its own adapter
(haiku.rag's: store/haiku_layout.py), chosen by store/identify.py.

Where behaviour legitimately differs, the layout states it as a property the layers
above ask without learning the kind of database:

- `read_only`: we never write to it (writes raise before touching anything);
- `ids_are_immutable`: a document id always names the same content, so per-id caches
  never go stale (haiku.rag rewrites documents under the same id).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from mcp_analysis.embed.names import known_dimension
from mcp_analysis.errors import DatabaseMismatchError, EmbedderError
from mcp_analysis.store import schema
from mcp_analysis.store.settings_row import StoredSettings

Rows = list[dict[str, Any]]
Tables = dict[str, Any]


@dataclass(frozen=True)
class EmbedderChoice:
    """The embedder that reads a database's vectors: its name, and the server it runs on (if any)."""

    name: str
    base_url: str | None


class Layout(Protocol):
    """What the `Store` asks of a database's layout (see module docs)."""

    @property
    def read_only(self) -> bool: ...

    @property
    def ids_are_immutable(self) -> bool: ...

    def describe(self) -> str:
        """What the database is, for messages ("haiku.rag 0.101.1 knowledge base")."""
        ...

    def refuse_writes(self, location: str) -> None:
        """Raise a `ReadOnlyDatabaseError` saying how to change the database, when it is read-only."""
        ...

    def check_searchable(self, location: str) -> None:
        """Raise an `AnalysisError` when the database lacks what search needs."""
        ...

    def query_embedder(
        self, stored: StoredSettings | None, configured: str, *, explicit: bool, base_url: str | None, location: str
    ) -> EmbedderChoice:
        """The embedder for queries; raise `DatabaseMismatchError` when the configured one cannot read it."""
        ...

    def embedder_failure(self, exc: EmbedderError, location: str, embedder: str) -> EmbedderError:
        """The error to show when the query embedder cannot run (what to do instead)."""
        ...

    def item_columns(self, columns: Sequence[str] | None) -> list[str] | None:
        """The ``document_items`` columns to select for `columns` (None: all)."""
        ...

    async def meta_rows(self, rows: Rows, tables: Tables) -> Rows: ...

    async def item_rows(self, rows: Rows, tables: Tables, columns: Sequence[str] | None) -> Rows: ...

    async def chunk_rows(self, rows: Rows, tables: Tables) -> Rows: ...

    async def catch_up(self, tables: Tables) -> None:
        """After ``document_meta`` changed: read every table at its latest version, forget derived values."""
        ...


class OwnLayout:
    """Our own databases: rows are read as stored; ids are immutable; writable."""

    @property
    def read_only(self) -> bool:
        return False

    @property
    def ids_are_immutable(self) -> bool:
        return True

    def describe(self) -> str:
        return "mcp-analysis knowledge base"

    def refuse_writes(self, location: str) -> None:
        return None

    def check_searchable(self, location: str) -> None:
        return None

    def query_embedder(
        self, stored: StoredSettings | None, configured: str, *, explicit: bool, base_url: str | None, location: str
    ) -> EmbedderChoice:
        """The recorded embedder unless one is configured explicitly, which must then be the same."""
        if stored is None:
            return EmbedderChoice(configured, base_url)
        if not explicit:
            return EmbedderChoice(stored.embedder, base_url)
        dimension = known_dimension(configured)
        if stored.embedder != configured or (dimension is not None and dimension != stored.vector_dim):
            shown = f"'{configured}'" + (f" ({dimension}-dim)" if dimension else "")
            raise DatabaseMismatchError(
                f"The knowledge base at {location} was built with embedder '{stored.embedder}' "
                f"({stored.vector_dim}-dim vectors), but the configured embedder is {shown}. "
                f"Use embedder '{stored.embedder}' (unset the `embedder` setting / MCP_ANALYSIS_EMBEDDER), "
                "or build a new knowledge base with the new embedder under another --db path."
            )
        return EmbedderChoice(configured, base_url)

    def embedder_failure(self, exc: EmbedderError, location: str, embedder: str) -> EmbedderError:
        return exc

    def item_columns(self, columns: Sequence[str] | None) -> list[str] | None:
        return list(columns) if columns else None

    async def meta_rows(self, rows: Rows, tables: Tables) -> Rows:
        return rows

    async def item_rows(self, rows: Rows, tables: Tables, columns: Sequence[str] | None) -> Rows:
        """Rows as stored, but an item without a heading level reads as None again (schema.NO_HEADING_LEVEL)."""
        for row in rows:
            if row.get("heading_level") == schema.NO_HEADING_LEVEL:
                row["heading_level"] = None
        return rows

    async def chunk_rows(self, rows: Rows, tables: Tables) -> Rows:
        return rows

    async def catch_up(self, tables: Tables) -> None:
        return None
