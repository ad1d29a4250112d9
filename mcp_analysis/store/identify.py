"""Which kind of database a location holds, told by its ``settings`` row, never by guessing.

- ours: the row says ``"app": "mcp-analysis"`` -> our schema, read as stored (`OwnLayout`);
- haiku.rag's: the row is haiku.rag's (store/haiku_database.py) -> checked, then read
  through its layout adapter (store/haiku_layout.py), read-only;
- empty: no row yet (a new knowledge base, written on the first ingest) -> ours.

Anything else (a row nobody we know wrote, haiku.rag's tables without a row, a newer
schema) is refused with a message naming what was found. This module is the store's
only door to haiku.rag's formats; the `Store` keeps the layout and never names the kind.
"""

from __future__ import annotations

import json
from typing import Any

from mcp_analysis.errors import DatabaseDamagedError, DatabaseMismatchError, damaged_database_message
from mcp_analysis.store import haiku_database, schema
from mcp_analysis.store.haiku_layout import HaikuLayout
from mcp_analysis.store.layout import Layout, OwnLayout
from mcp_analysis.store.settings_row import StoredSettings

SUPPORTED = f"its own knowledge bases and {haiku_database.SUPPORTED}"
"""What mcp-analysis reads, for messages ("mcp-analysis reads ...")."""


def read_settings_row(text: str, location: str = "the knowledge base") -> StoredSettings:
    """Parse a settings row, telling ours from haiku.rag's explicitly (never by guessing)."""
    try:
        data = json.loads(text)
    except (TypeError, json.JSONDecodeError):
        data = None
    if isinstance(data, dict):
        ours = StoredSettings.ours_from(data)
        if ours is not None:
            return ours
        if haiku_database.is_haiku_settings(data):
            return haiku_database.stored_settings(data, location)
    shown = str(text)[:160].replace("\n", " ")
    raise DatabaseMismatchError(
        f"{location} has a settings row that neither mcp-analysis nor haiku.rag wrote ({shown!r}). "
        f"mcp-analysis reads its own knowledge bases (schema version <= {schema.SCHEMA_VERSION}) and "
        f"{haiku_database.SUPPORTED}."
    )


async def identify(location: str, tables: dict[str, Any], create: bool) -> tuple[StoredSettings | None, Layout]:
    """Who wrote this database (from its settings row), and the layout to read it through.

    With `create`, the database is about to be written: a read-only one is refused here,
    before anything (the ingest's lock file included) touches it.
    """
    stored = None
    if schema.SETTINGS in tables:
        rows = await tables[schema.SETTINGS].query().limit(1).to_list()
        if rows:
            stored = read_settings_row(rows[0].get("settings") or "", location)
    schemas = {name: await table.schema() for name, table in tables.items()}
    if stored is None and haiku_database.looks_like_haiku({n: sc.names for n, sc in schemas.items()}):
        raise DatabaseMismatchError(
            f"{location} has haiku.rag's tables but no settings row, so the embedder that built it is unknown. "
            f"Rebuild it with haiku.rag (`haiku-rag rebuild --db {location}`); mcp-analysis reads "
            f"{haiku_database.SUPPORTED}."
        )
    if stored is not None and stored.origin == haiku_database.ORIGIN:
        layout: Layout = await HaikuLayout.checked(location, stored, tables, schemas)
    else:
        _check_ours(location, tables, stored, create)
        layout = OwnLayout()
    if create:
        layout.refuse_writes(location)
    return stored, layout


def _check_ours(location: str, tables: dict[str, Any], stored: StoredSettings | None, create: bool) -> None:
    missing = [f"{name}.lance" for name in schema.REQUIRED_TABLES if name not in tables]
    if stored is not None and missing:  # its settings row is written after every table it needs (writes.py)
        tables_are = "tables {} are" if len(missing) > 1 else "table {} is"
        what = f"its {tables_are.format(', '.join(missing))} missing"
        raise DatabaseDamagedError(damaged_database_message(location, what))
    missing_core = {schema.DOCUMENT_META, schema.SETTINGS} - tables.keys()
    if tables and missing_core and not create:
        raise DatabaseMismatchError(
            f"{location} is not an mcp-analysis or haiku.rag knowledge base (it has the tables "
            f"{', '.join(sorted(tables))} but not {', '.join(sorted(missing_core))})."
        )
    if stored is not None and stored.schema_version > schema.SCHEMA_VERSION:
        raise DatabaseMismatchError(
            f"{location} uses schema version {stored.schema_version}; this mcp-analysis understands "
            f"up to {schema.SCHEMA_VERSION}. Upgrade mcp-analysis."
        )
