"""The vector leg over an HNSW index: any `search.candidates` x refine factor works with any ef.

LanceDB refuses an HNSW query whose ef is below the rows it refines (limit x refine factor:
"ef must be greater than or equal to k"); the store widens ef to that instead.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mcp_analysis.store.database import Store
from mcp_analysis.store.writes import DocumentRows
from tests.search.long_sections import rows_of

pytestmark = pytest.mark.anyio

DIMENSION = 8


def _document(index: int, vectors: np.ndarray) -> DocumentRows:
    doc_id = f"doc-{index}"
    chunks = [
        {
            "id": f"{doc_id}-{c}",
            "document_id": doc_id,
            "content": f"harbour crane {index} {c}",
            "content_fts": f"harbour crane {index} {c}",
            "metadata": json.dumps({"item_range": [c, c], "section_range": [c, c], "labels": ["text"]}),
            "order": c,
            "vector": vector.tolist(),
        }
        for c, vector in enumerate(vectors)
    ]
    return rows_of(doc_id, [], chunks)


async def indexed_store(path: Path, seed: int, *, reverse: bool = False) -> tuple[Store, np.ndarray]:
    """30 documents of 20 random chunks each, HNSW-indexed: a vector leg that walks a graph (written last to
    first with `reverse`: the same commits, other rows where each document's chunks lie)."""
    vectors = np.random.default_rng(seed).normal(size=(600, DIMENSION)).astype(np.float32)
    store = await Store.open(path, create=True)
    await store.initialize("test", DIMENSION)
    order = range(29, -1, -1) if reverse else range(30)
    await store.write_documents([_document(i, vectors[i * 20 : (i + 1) * 20]) for i in order])
    await store.ensure_indexes(vector_index_min_rows=1)
    return store, vectors


async def test_candidates_times_refine_factor_above_ef(tmp_path: Path) -> None:
    store, vectors = await indexed_store(tmp_path / "kb.lancedb", seed=5)
    assert any(name.startswith("IvfHnsw") for name in (await store.index_names())["chunks"])
    try:
        found = await store.candidates("harbour crane", vectors[7], 100, None, ef=64, refine_factor=4)
    finally:
        store.close()
    vector_leg = sorted((c for c in found if c.vector_rank is not None), key=lambda c: c.vector_rank or 0)
    assert len(vector_leg) == 100
    assert vector_leg[0].key == "doc-0-7"  # the query's own vector comes first
