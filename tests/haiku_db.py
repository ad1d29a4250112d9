"""The haiku.rag 0.101.1 fixture database: copies, raw rows (the reference truth), variants.

The fixture in tests/fixtures is never opened: every test works on a copy. Expected
values come from reading the copy's tables with LanceDB directly, not from constants.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lancedb
import numpy as np
import pyarrow as pa

from tests.conftest import REPO

FIXTURE = REPO / "tests" / "fixtures" / "haiku_rag_db_0.101.1"
TABLES = ("documents", "document_meta", "chunks", "document_items", "settings")


def copy_fixture(target: Path) -> Path:
    shutil.copytree(FIXTURE, target)
    for path in [target, *target.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)
    return target


def tree_hashes(root: Path) -> dict[str, str]:
    """sha256 of every file under `root`, by relative path (new or missing files show up too)."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@dataclass
class RawDb:
    """The rows haiku.rag stored, read with LanceDB directly."""

    meta: dict[str, dict[str, Any]]
    content: dict[str, str]
    chunks: dict[str, dict[str, Any]]
    items: dict[str, list[dict[str, Any]]]  # by document id, in position order
    settings: dict[str, Any]
    chunk_ids_of_item: dict[tuple[str, str], list[str]] = field(default_factory=dict)

    def chunk_meta(self, chunk_id: str) -> dict[str, Any]:
        return json.loads(self.chunks[chunk_id]["metadata"])


async def read_raw(path: Path) -> RawDb:
    db = await lancedb.connect_async(str(path))
    table = {name: await db.open_table(name) for name in TABLES}
    meta = {r["id"]: r for r in await table["document_meta"].query().to_list()}
    content = {r["id"]: r["content"] for r in await table["documents"].query().select(["id", "content"]).to_list()}
    chunks = {
        r["id"]: r
        for r in await table["chunks"]
        .query()
        .select(["id", "document_id", "content", "content_fts", "metadata", "order"])
        .to_list()
    }
    items: dict[str, list[dict[str, Any]]] = defaultdict(list)
    columns = ["document_id", "position", "self_ref", "label", "text", "page_numbers", "heading_level"]
    for row in await table["document_items"].query().select(columns).to_list():
        items[row["document_id"]].append(row)
    for rows in items.values():
        rows.sort(key=lambda r: r["position"])
    settings = json.loads((await table["settings"].query().to_list())[0]["settings"])
    raw = RawDb(meta, content, chunks, dict(items), settings)
    # What haiku.rag's sandbox shows as an item's chunk_ids: chunks listing its self_ref.
    for chunk in sorted(chunks.values(), key=lambda c: (c["document_id"], c["order"], c["id"])):
        for ref in json.loads(chunk["metadata"])["doc_item_refs"]:
            raw.chunk_ids_of_item.setdefault((chunk["document_id"], ref), []).append(chunk["id"])
    db.close()
    return raw


async def make_variant(
    source_copy: Path,
    target: Path,
    *,
    settings: dict[str, Any] | str | None = None,
    drop: tuple[str, ...] = (),
    vector_dim: int | None = None,
) -> Path:
    """A haiku.rag-layout database built from a fixture copy's rows with one thing changed."""
    assert source_copy.resolve() != FIXTURE.resolve()
    source = await lancedb.connect_async(str(source_copy))
    db = await lancedb.connect_async(str(target))
    for name in TABLES:
        if name in drop:
            continue
        data = await (await source.open_table(name)).query().to_arrow()
        if name == "settings" and settings is not None:
            text = settings if isinstance(settings, str) else json.dumps(settings)
            data = pa.table({"id": ["settings"], "settings": [text]}, schema=data.schema)
        if name == "chunks" and vector_dim is not None:
            rng = np.random.default_rng(7)
            vectors = rng.normal(size=(data.num_rows, vector_dim)).astype(np.float32)
            column = pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), vector_dim)
            data = data.set_column(data.schema.get_field_index("vector"), "vector", column)
        await db.create_table(name, data=data)
    if "chunks" not in drop:
        from lancedb.index import FTS

        await (await db.open_table("chunks")).create_index("content_fts", config=FTS(with_position=True))
    source.close()
    db.close()
    return target


def haiku_settings(
    version: str = "0.101.1", provider: str = "sentence-transformers", name: str | None = None, dim: int = 384
) -> dict[str, Any]:
    return {
        "version": version,
        "embeddings": {
            "model": {"provider": provider, "name": name or "sentence-transformers/all-MiniLM-L6-v2", "vector_dim": dim}
        },
    }
