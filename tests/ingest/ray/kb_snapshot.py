"""A knowledge base's content read table by table, keyed by what does not depend on the run (a
document's uri, a chunk's order), so two ingests of the same files compare equal: ids, timestamps
and row order are the run's own."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import lancedb
import numpy as np
import zstandard

from mcp_analysis.store import schema


def _rows(db: lancedb.DBConnection, name: str) -> list[dict[str, Any]]:
    return db.open_table(name).to_arrow().to_pylist()  # type: ignore[no-any-return]


def snapshot(path: Path | str) -> dict[str, Any]:
    """Every table's rows without run-specific values, plus the vectors and the indexes."""
    db = lancedb.connect(path)
    meta = _rows(db, schema.DOCUMENT_META)
    uri_of = {m["id"]: m["uri"] for m in meta}
    chunks = _rows(db, schema.CHUNKS)
    chunk_key = {c["id"]: (uri_of[c["document_id"]], c["order"]) for c in chunks}
    settings = json.loads(_rows(db, schema.SETTINGS)[0]["settings"])
    return {
        "document_meta": sorted(
            (m["uri"], m["title"], json.loads(m["metadata"]), m["content_hash"], m["content_size"]) for m in meta
        ),
        "documents": sorted(
            (uri_of[d["id"]], d["content"], zstandard.decompress(d["docling_document"]))
            for d in _rows(db, schema.DOCUMENTS)
        ),
        "chunks": sorted(
            (uri_of[c["document_id"]], c["order"], c["content"], c["content_fts"], c["metadata"]) for c in chunks
        ),
        "vectors": {chunk_key[c["id"]]: np.asarray(c["vector"], dtype=np.float32) for c in chunks},
        "document_items": sorted(
            (
                uri_of[i["document_id"]],
                i["position"],
                i["self_ref"],
                i["label"],
                i["text"],
                i["page_numbers"],
                i["heading_level"],
                sorted(chunk_key[c] for c in i["chunk_ids"]),
            )
            for i in _rows(db, schema.DOCUMENT_ITEMS)
        ),
        "document_tables": sorted(
            (uri_of[t["document_id"]], *(v for k, v in t.items() if k != "document_id"))
            for t in _rows(db, schema.DOCUMENT_TABLES)
        ),
        "settings": {k: v for k, v in settings.items() if k != "created_at"},
        "indexes": {
            name: sorted((ix.name, ix.index_type, tuple(ix.columns)) for ix in db.open_table(name).list_indices())
            for name in schema.TABLES
        },
    }


def assert_same_knowledge_base(got: dict[str, Any], expected: dict[str, Any]) -> None:
    """Equal table by table; vectors equal within float noise."""
    for table in expected:
        if table != "vectors":
            assert got[table] == expected[table], f"{table} differs"
    assert got["vectors"].keys() == expected["vectors"].keys()
    for key, vector in expected["vectors"].items():
        np.testing.assert_allclose(got["vectors"][key], vector, atol=1e-5, err_msg=f"the vector of chunk {key}")


def moved_to(taken: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    """`taken` as if its documents' uris began with `new` instead of `old` (the same files added from
    another place: a folder and an object-store prefix)."""

    def swap(value: Any) -> Any:
        if isinstance(value, str):
            return new + value[len(old) :] if value.startswith(old) else value
        if isinstance(value, tuple):
            return tuple(swap(v) for v in value)
        if isinstance(value, list):
            return sorted(swap(v) for v in value)
        if isinstance(value, dict):
            return {swap(k): swap(v) for k, v in value.items()}
        return value

    return {table: rows if table in ("settings", "indexes") else swap(rows) for table, rows in taken.items()}
