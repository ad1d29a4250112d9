"""Reading knowledge bases written by haiku.rag, without ever writing to them.

A haiku.rag database is told from ours by its ``settings`` row: ours says
``"app": "mcp-analysis"`` with an integer schema version; haiku.rag's has a version
string (``"0.101.1"``) and an embedder record ``{"provider", "name", "vector_dim"}``.
Anything else is refused with a message naming what was found.

Their layout differs from ours in what is stored, not in where; the differences are
derived at read time here, so the layers above stay unaware of them:

- ``document_items.page_numbers`` is a JSON string (ours: a list);
- items carry no ``chunk_ids``: derived from the chunks' ``doc_item_refs``, as
  haiku.rag's own sandbox does;
- chunk metadata has no ``item_range`` / ``section_range`` (used by context
  expansion): derived from the positions of the chunk's ``doc_item_refs``;
- ``document_meta`` has no ``content_size``: measured in the database
  (``octet_length(content)``) once per table version.

haiku.rag updates a document in place (same id). Every derived value is therefore
cached only until the ``document_meta`` table changes (see `HaikuLayout.forget`).
"""

from __future__ import annotations

import json
import logging
import re
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mcp_analysis.errors import DatabaseMismatchError
from mcp_analysis.store import schema
from mcp_analysis.store.filters import sql_in
from mcp_analysis.structure import section_ranges

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
_UNRESOLVED = (-1, -1)  # a chunk none of whose doc_item_refs is a stored item: never expanded
_STRUCTURE_CACHE_DOCS = 4096


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


@dataclass
class _Structure:
    """What context expansion and items.jsonl need to know about one document's items."""

    position: dict[str, int]
    sections: list[tuple[int, int]]
    chunk_ids: dict[str, list[str]] | None = None


def _page_numbers(raw: Any) -> list[int]:
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError:
            return []
    if not isinstance(raw, list):
        return []
    return [int(p) for p in raw if isinstance(p, int | float)]


@dataclass
class HaikuLayout:
    """Read-time adapter for one haiku.rag database (see module docs)."""

    version: str
    embedder: HaikuEmbedder
    has_fts: bool = True
    _structures: OrderedDict[str, _Structure] = field(default_factory=OrderedDict)
    _sizes: dict[str, int] = field(default_factory=dict)
    _sizes_version: int = -1

    def forget(self) -> None:
        """Drop everything derived: the documents may have changed (haiku.rag updates in place)."""
        self._structures.clear()
        self._sizes_version = -1

    async def catch_up(self, tables: dict[str, Any]) -> None:
        """After `document_meta` changed: read every table at its latest version, forget derived values.

        (Each table handle otherwise refreshes on its own read-consistency timer, so the
        contents of a rewritten document could still be read at their old version.)
        """
        for name in (schema.DOCUMENTS, schema.CHUNKS, schema.DOCUMENT_ITEMS):
            if name in tables:
                await tables[name].checkout_latest()
        self.forget()

    def describe(self) -> str:
        return f"haiku.rag {self.version} knowledge base"

    # ------------------------------------------------------------ meta rows

    async def content_sizes(self, documents: Any) -> dict[str, int]:
        """id -> bytes of the stored markdown, measured by LanceDB (contents stay on disk)."""
        version = int(await documents.version())
        if version != self._sizes_version:
            rows = await documents.query().select({"id": "id", "size": "octet_length(content)"}).to_list()
            self._sizes = {row["id"]: int(row["size"] or 0) for row in rows}
            self._sizes_version = version
        return self._sizes

    # ------------------------------------------------------------ structure

    async def _structure(
        self, items_table: Any, chunks_table: Any, doc_ids: Iterable[str], *, chunk_ids: bool
    ) -> dict[str, _Structure]:
        wanted = list(dict.fromkeys(doc_ids))
        missing = [d for d in wanted if d not in self._structures]
        if missing:
            rows = (
                await items_table.query()
                .where(sql_in("document_id", missing))
                .select(["document_id", "position", "self_ref", "label", "heading_level"])
                .to_list()
            )
            grouped: dict[str, list[dict[str, Any]]] = {d: [] for d in missing}
            for row in rows:
                grouped[row["document_id"]].append(row)
            for doc_id, doc_rows in grouped.items():
                doc_rows.sort(key=lambda r: int(r["position"]))
                labels = [r["label"] for r in doc_rows]
                levels = [int(r["heading_level"] or 0) for r in doc_rows]
                # Our section_ranges works on list indices; haiku.rag positions are 0..n-1 in order.
                by_index = section_ranges(labels, levels)
                positions = [int(r["position"]) for r in doc_rows]
                sections_by_position = {positions[i]: (positions[a], positions[b]) for i, (a, b) in enumerate(by_index)}
                top = positions[-1] + 1 if positions else 0
                self._structures[doc_id] = _Structure(
                    position={r["self_ref"]: int(r["position"]) for r in doc_rows},
                    sections=[sections_by_position.get(p, (p, p)) for p in range(top)],
                )
            while len(self._structures) > _STRUCTURE_CACHE_DOCS:
                self._structures.popitem(last=False)
        out = {d: self._structures[d] for d in wanted if d in self._structures}
        if chunk_ids:
            need = [d for d, s in out.items() if s.chunk_ids is None]
            if need:
                rows = (
                    await chunks_table.query()
                    .where(sql_in("document_id", need))
                    .select(["id", "document_id", "metadata", "order"])
                    .to_list()
                )
                rows.sort(key=lambda r: (r["document_id"], int(r["order"] or 0), r["id"]))
                index: dict[str, dict[str, list[str]]] = {d: {} for d in need}
                for row in rows:
                    refs = _chunk_meta(row).get("doc_item_refs") or []
                    for ref in refs:
                        index[row["document_id"]].setdefault(ref, []).append(row["id"])
                for doc_id in need:
                    out[doc_id].chunk_ids = index[doc_id]
        return out

    # ------------------------------------------------------------ rows

    async def items(
        self, rows: list[dict[str, Any]], items_table: Any, chunks_table: Any, *, chunk_ids: bool
    ) -> list[dict[str, Any]]:
        """Item rows in our shape: page numbers as a list; chunk_ids derived when asked for."""
        structures = (
            await self._structure(items_table, chunks_table, {r["document_id"] for r in rows}, chunk_ids=True)
            if chunk_ids and rows
            else {}
        )
        out = []
        for row in rows:
            item = dict(row)
            if "page_numbers" in item:
                item["page_numbers"] = _page_numbers(item["page_numbers"])
            item.pop("tree_depth", None)
            if chunk_ids:
                index = structures[row["document_id"]].chunk_ids if row["document_id"] in structures else None
                item["chunk_ids"] = list((index or {}).get(row.get("self_ref", ""), []))
            out.append(item)
        return out

    async def chunks(self, rows: list[dict[str, Any]], items_table: Any, chunks_table: Any) -> list[dict[str, Any]]:
        """Chunk rows whose metadata also carries item_range and section_range (for context expansion)."""
        if not rows:
            return rows
        structures = await self._structure(items_table, chunks_table, {r["document_id"] for r in rows}, chunk_ids=False)
        out = []
        for row in rows:
            meta = _chunk_meta(row)
            structure = structures.get(row["document_id"])
            positions = sorted(
                structure.position[ref]
                for ref in meta.get("doc_item_refs") or []
                if structure and ref in structure.position
            )
            if structure is None or not positions:
                item_range, section_range = _UNRESOLVED, _UNRESOLVED
            else:
                first, last = positions[0], positions[-1]
                start, end = structure.sections[first] if first < len(structure.sections) else (first, last)
                item_range, section_range = (first, last), (min(start, first), max(end, last))
            meta["item_range"] = list(item_range)
            meta["section_range"] = list(section_range)
            meta["headings"] = meta.get("headings") or []
            out.append({**row, "metadata": json.dumps(meta, ensure_ascii=False)})
        return out


def _chunk_meta(row: dict[str, Any]) -> dict[str, Any]:
    try:
        meta = json.loads(row.get("metadata") or "{}")
    except json.JSONDecodeError:
        return {}
    return meta if isinstance(meta, dict) else {}
