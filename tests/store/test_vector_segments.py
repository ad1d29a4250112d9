"""Many small adds, each optimized, keep the vector index at `search.vector_index_max_segments`.

LanceDB's optimize folds each add's rows into the HNSW index as a segment of its own, searched
beside the others by every query; `Store.optimize` merges those after the first past the bound,
the first (built over the whole table) left as it was, and the vector leg still finds the exact
nearest neighbours.
"""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pytest

from mcp_analysis.store import schema
from mcp_analysis.store.database import Store
from tests.store.test_vector_leg import DIMENSION, _document, indexed_store

pytestmark = pytest.mark.anyio

BOUND = 3
ADDS = 6


def _segments(path: Path) -> list[tuple[str, frozenset[int]]]:
    """Each vector index segment's uuid and the fragments it covers, oldest first."""
    dataset = lance.dataset(str(path / f"{schema.CHUNKS}.lance"))
    [vector] = [d for d in dataset.describe_indices() if d.field_names == ["vector"]]
    return [(s.uuid, frozenset(s.fragment_ids)) for s in sorted(vector.segments, key=lambda s: s.created_at)]


async def _vector_top(store: Store, query: np.ndarray, k: int) -> list[str]:
    found = await store.candidates("harbour crane", query, k, None, ef=512, refine_factor=4)
    return [c.key for c in sorted((c for c in found if c.vector_rank is not None), key=lambda c: c.vector_rank or 0)]


def _exact_top(keys: list[str], vectors: np.ndarray, query: np.ndarray, k: int) -> list[str]:
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    similarity = unit @ (query / np.linalg.norm(query))
    return [keys[i] for i in np.argsort(-similarity, kind="stable")[:k]]


async def test_small_adds_keep_the_segments_bounded_and_search_exact(tmp_path: Path) -> None:
    path = tmp_path / "kb.lancedb"
    store, vectors = await indexed_store(path, seed=11)
    keys = [f"doc-{i // 20}-{i % 20}" for i in range(len(vectors))]
    first = _segments(path)[0]
    rng = np.random.default_rng(12)
    try:
        counts = []
        for add in range(ADDS):
            new = rng.normal(size=(40, DIMENSION)).astype(np.float32)
            await store.write_documents([_document(100 + 2 * add + d, new[d * 20 : (d + 1) * 20]) for d in range(2)])
            keys += [f"doc-{100 + 2 * add + d}-{c}" for d in range(2) for c in range(20)]
            vectors = np.vstack([vectors, new])
            await store.optimize(vector_index_max_segments=BOUND)
            counts.append(await store.vector_segments())
        segments = _segments(path)
        queries = rng.normal(size=(10, DIMENSION)).astype(np.float32)
        found = [await _vector_top(store, q, 10) for q in queries]
        unindexed = [ix.num_unindexed_rows for ix in await store.table(schema.CHUNKS).list_indices()]
    finally:
        store.close()
    assert max(counts) <= BOUND, counts
    assert segments[0] == first  # the first segment is never rebuilt
    assert sum(len(fragments) for _, fragments in segments) == len(
        lance.dataset(str(path / "chunks.lance")).get_fragments()
    )
    assert not any(unindexed)
    assert found == [_exact_top(keys, vectors, q, 10) for q in queries]
