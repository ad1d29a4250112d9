"""Hybrid retrieval: LanceDB vector (cosine) + full-text, fused by reciprocal rank (RRF).

The document filter becomes a ``document_id IN (...)`` prefilter, applied to both
legs before ranking, so filtered-out documents can never take a slot.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mcp_analysis.store import schema
from mcp_analysis.store.database import Store
from mcp_analysis.store.models import ChunkRecord

_COLUMNS = ["id", "document_id", "content", "metadata", "order"]


@dataclass
class Hit:
    chunk: ChunkRecord
    score: float


_RRF_K = 60  # LanceDB's default for the fusion of both legs


async def hybrid_search(
    store: Store,
    vector: np.ndarray | None,
    query: str,
    limit: int,
    prefilter: str | None,
    *,
    ef: int = 256,
    refine_factor: int = 4,
) -> list[Hit]:
    """Top `limit` chunks by RRF of vector and full-text ranks (prefiltered).

    With an HNSW index (large knowledge bases), `ef` widens the graph search and
    `refine_factor` re-ranks candidates with exact distances; without one the
    vector leg is an exact scan and both are ignored. Without a `vector` (keyword
    mode) only the full-text leg runs, scored 1 / (60 + rank) like one leg of RRF.
    """
    if schema.CHUNKS not in store.tables:
        return []
    table = store.table(schema.CHUNKS)
    if vector is None:
        keyword = table.query().nearest_to_text(query, columns=["content_fts"]).select(_COLUMNS).limit(limit)
        if prefilter:
            keyword = keyword.where(prefilter)
        found = await store.complete_chunks(await keyword.to_list())
        return [Hit(ChunkRecord.from_row(r), 1.0 / (_RRF_K + rank)) for rank, r in enumerate(found, start=1)]
    builder = (
        table.query()
        .nearest_to(vector.astype(np.float32))
        .distance_type("cosine")
        .nearest_to_text(query, columns=["content_fts"])
        .select(_COLUMNS)
        .limit(limit)
        .ef(ef)
        .refine_factor(refine_factor)
    )
    if prefilter:
        builder = builder.where(prefilter)
    rows = await store.complete_chunks(await builder.to_list())
    return [Hit(ChunkRecord.from_row(r), float(r.get("_relevance_score") or 0.0)) for r in rows]
