"""The store's layout adapter for databases haiku.rag wrote: their rows read as ours.

Their layout differs from ours in what is stored, not in where; the differences are
derived at read time here, so the layers above stay unaware of them:

- ``document_items.page_numbers`` is a JSON string (ours: a list);
- items carry no ``chunk_ids``: derived from the chunks' ``doc_item_refs``, as
  haiku.rag's own sandbox does;
- chunk metadata has no ``item_range`` / ``section_range`` (used by context
  expansion): derived from the positions of the chunk's ``doc_item_refs``;
- ``document_meta`` has no ``content_size``: measured in the database
  (``octet_length(content)``) once per table version.

Such a database is read-only (`read_only`), and haiku.rag updates a document in place
(same id), so ids are not immutable (`ids_are_immutable` is false): every derived value
is cached only until the ``document_meta`` table changes (`catch_up`).
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mcp_analysis.errors import AnalysisError, EmbedderError, ReadOnlyDatabaseError
from mcp_analysis.haiku.embedders import choose_query_embedder, default_base_url, unavailable
from mcp_analysis.store import schema
from mcp_analysis.store.filters import sql_in
from mcp_analysis.store.haiku_database import HaikuEmbedder, check_tables, check_version
from mcp_analysis.store.layout import EmbedderChoice, Rows, Tables
from mcp_analysis.store.settings_row import StoredSettings
from mcp_analysis.structure import section_ranges

log = logging.getLogger(__name__)

_UNRESOLVED = (-1, -1)  # a chunk none of whose doc_item_refs is a stored item: never expanded
_STRUCTURE_CACHE_DOCS = 4096


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


def _derives_chunk_ids(columns: Sequence[str] | None) -> bool:
    return not columns or "chunk_ids" in columns


@dataclass
class HaikuLayout:
    """Read-time adapter for one haiku.rag database (see module docs); implements store.layout.Layout."""

    version: str
    embedder: HaikuEmbedder
    has_fts: bool = True
    _structures: OrderedDict[str, _Structure] = field(default_factory=OrderedDict)
    _sizes: dict[str, int] = field(default_factory=dict)
    _sizes_version: int = -1

    @classmethod
    async def checked(
        cls, location: str, stored: StoredSettings, tables: Tables, schemas: dict[str, Any]
    ) -> HaikuLayout:
        """The adapter for a database whose settings row haiku.rag wrote, once its version and tables pass."""
        check_version(stored.origin_version, location)
        check_tables(location, stored.origin_version, tables, schemas, stored.vector_dim)
        provider, _, name = stored.embedder.partition(":")
        indexed = {tuple(ix.columns) for ix in await tables[schema.CHUNKS].list_indices()}
        layout = cls(
            stored.origin_version,
            HaikuEmbedder(provider, name, stored.vector_dim),
            has_fts=("content_fts",) in indexed,
        )
        if not layout.has_fts:
            log.warning("%s has no full-text index on chunks.content_fts; search will be refused.", location)
        return layout

    # ------------------------------------------------------------ what differs

    @property
    def read_only(self) -> bool:
        return True

    @property
    def ids_are_immutable(self) -> bool:
        return False

    def describe(self) -> str:
        return f"haiku.rag {self.version} knowledge base"

    def refuse_writes(self, location: str) -> None:
        raise ReadOnlyDatabaseError(
            f"{location} is a {self.describe()}; mcp-analysis serves it read-only and never writes "
            f"to it. Add or remove its documents with haiku.rag (e.g. `haiku-rag add-src PATH --db {location}`, "
            f"`haiku-rag delete ID --db {location}`); a running server picks the changes up by itself."
        )

    def check_searchable(self, location: str) -> None:
        if not self.has_fts:
            raise AnalysisError(
                f"{location} has no full-text index on its chunks, which search needs; mcp-analysis does "
                "not write to haiku.rag databases. Create it with haiku.rag (`haiku-rag migrate` / `haiku-rag vacuum`)."
            )

    def query_embedder(
        self, stored: StoredSettings | None, configured: str, *, explicit: bool, base_url: str | None, location: str
    ) -> EmbedderChoice:
        """The configured embedder if compatible, else the one mapped from their record (haiku/embedders.py)."""
        record = self.embedder
        name = choose_query_embedder(
            record.provider, record.name, record.vector_dim, location, configured if explicit else None
        )
        return EmbedderChoice(name, base_url or default_base_url(name))

    def embedder_failure(self, exc: EmbedderError, location: str, embedder: str) -> EmbedderError:
        """Say what the database was built with, and offer keyword-only search."""
        record = self.embedder
        cause = exc.__cause__ or exc
        return unavailable(record.provider, record.name, record.vector_dim, location, embedder, cause)

    async def catch_up(self, tables: Tables) -> None:
        """After `document_meta` changed: read every table at its latest version, forget derived values.

        (Each table handle otherwise refreshes on its own read-consistency timer, so the
        contents of a rewritten document could still be read at their old version.)
        """
        for name in (schema.DOCUMENTS, schema.CHUNKS, schema.DOCUMENT_ITEMS):
            if name in tables:
                await tables[name].checkout_latest()
        self.forget()

    def forget(self) -> None:
        """Drop everything derived: the documents may have changed (haiku.rag updates in place)."""
        self._structures.clear()
        self._sizes_version = -1

    # ------------------------------------------------------------ rows

    async def meta_rows(self, rows: Rows, tables: Tables) -> Rows:
        """Meta rows with the ``content_size`` haiku.rag does not store."""
        if schema.DOCUMENTS not in tables:
            return rows
        sizes = await self._content_sizes(tables[schema.DOCUMENTS])
        return [{**r, "content_size": sizes.get(r["id"], 0)} for r in rows]

    def item_columns(self, columns: Sequence[str] | None) -> list[str] | None:
        """Without ``chunk_ids`` (derived), plus what deriving them needs."""
        wanted = [c for c in columns or () if c != "chunk_ids"]
        if not wanted:
            return None
        derive = _derives_chunk_ids(columns)
        return wanted + [c for c in ("document_id", "self_ref") if derive and c not in wanted]

    async def item_rows(self, rows: Rows, tables: Tables, columns: Sequence[str] | None) -> Rows:
        """Item rows in our shape: page numbers as a list; chunk_ids derived when asked for."""
        chunk_ids = _derives_chunk_ids(columns)
        documents = {r["document_id"] for r in rows}
        structures = await self._structure(tables, documents, chunk_ids=True) if chunk_ids and rows else {}
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

    async def chunk_rows(self, rows: Rows, tables: Tables) -> Rows:
        """Chunk rows whose metadata also carries item_range and section_range (for context expansion)."""
        if not rows:
            return rows
        structures = await self._structure(tables, {r["document_id"] for r in rows}, chunk_ids=False)
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

    # ------------------------------------------------------------ derived values

    async def _content_sizes(self, documents: Any) -> dict[str, int]:
        """id -> bytes of the stored markdown, measured by LanceDB (contents stay on disk)."""
        version = int(await documents.version())
        if version != self._sizes_version:
            rows = await documents.query().select({"id": "id", "size": "octet_length(content)"}).to_list()
            self._sizes = {row["id"]: int(row["size"] or 0) for row in rows}
            self._sizes_version = version
        return self._sizes

    async def _structure(self, tables: Tables, doc_ids: Iterable[str], *, chunk_ids: bool) -> dict[str, _Structure]:
        """Each document's item positions and sections (and, when asked, which chunks cite each item)."""
        wanted = list(dict.fromkeys(doc_ids))
        missing = [d for d in wanted if d not in self._structures]
        if missing:
            await self._load_structures(tables[schema.DOCUMENT_ITEMS], missing)
        out = {d: self._structures[d] for d in wanted if d in self._structures}
        need = [d for d, s in out.items() if s.chunk_ids is None] if chunk_ids else []
        if need:
            index = await _chunk_ids_by_item(tables[schema.CHUNKS], need)
            for doc_id in need:
                out[doc_id].chunk_ids = index[doc_id]
        return out

    async def _load_structures(self, items_table: Any, doc_ids: list[str]) -> None:
        rows = (
            await items_table.query()
            .where(sql_in("document_id", doc_ids))
            .select(["document_id", "position", "self_ref", "label", "heading_level"])
            .to_list()
        )
        grouped: dict[str, list[dict[str, Any]]] = {d: [] for d in doc_ids}
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


async def _chunk_ids_by_item(chunks_table: Any, doc_ids: list[str]) -> dict[str, dict[str, list[str]]]:
    """document id -> item self_ref -> the ids of the chunks built from it, in chunk order."""
    rows = (
        await chunks_table.query()
        .where(sql_in("document_id", doc_ids))
        .select(["id", "document_id", "metadata", "order"])
        .to_list()
    )
    rows.sort(key=lambda r: (r["document_id"], int(r["order"] or 0), r["id"]))
    index: dict[str, dict[str, list[str]]] = {d: {} for d in doc_ids}
    for row in rows:
        for ref in _chunk_meta(row).get("doc_item_refs") or []:
            index[row["document_id"]].setdefault(ref, []).append(row["id"])
    return index


def _chunk_meta(row: dict[str, Any]) -> dict[str, Any]:
    try:
        meta = json.loads(row.get("metadata") or "{}")
    except json.JSONDecodeError:
        return {}
    return meta if isinstance(meta, dict) else {}
