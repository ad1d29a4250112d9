"""Hybrid retrieval: LanceDB vector (cosine) + full-text, fused by reciprocal rank (RRF).

The document filter becomes a ``document_id IN (...)`` prefilter, applied to both
legs before ranking, so filtered-out documents can never take a slot. Asked for
`evidence`, each hit also carries what the legs measured (its vector's cosine to the
query's, its full-text score), which re-ranking (rerank.py) fuses by value, not by rank.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mcp_analysis.store import schema
from mcp_analysis.store.database import Store
from mcp_analysis.store.lance import RRFReranker
from mcp_analysis.store.models import ChunkRecord

_COLUMNS = ["id", "document_id", "content", "metadata", "order"]


@dataclass
class Evidence:
    """What each leg of a hybrid query measured for one chunk."""

    cosine: float  # of the chunk's vector and the query's (exact, whichever leg found the chunk)
    keyword: float | None  # BM25 score of the full-text leg; None when that leg did not return it


@dataclass
class Hit:
    chunk: ChunkRecord
    score: float
    evidence: Evidence | None = None


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
    evidence: bool = False,
) -> list[Hit]:
    """Top `limit` chunks by RRF of vector and full-text ranks (prefiltered).

    With an HNSW index (large knowledge bases), `ef` widens the graph search and
    `refine_factor` re-ranks candidates with exact distances; without one the
    vector leg is an exact scan and both are ignored. Without a `vector` (keyword
    mode) only the full-text leg runs, scored 1 / (60 + rank) like one leg of RRF.
    Each leg returns up to `limit` rows, so the fused list can hold up to twice that.
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
    query_vector = vector.astype(np.float32)
    builder = (
        table.query()
        .nearest_to(query_vector)
        .distance_type("cosine")
        .nearest_to_text(query, columns=["content_fts"])
        .select([*_COLUMNS, "vector"] if evidence else _COLUMNS)
        .limit(limit)
        .ef(ef)
        .refine_factor(refine_factor)
    )
    if evidence:
        builder = builder.rerank(RRFReranker(return_score="all"))
    if prefilter:
        builder = builder.where(prefilter)
    rows = await store.complete_chunks(await builder.to_list())
    hits = [Hit(ChunkRecord.from_row(r), float(r.get("_relevance_score") or 0.0)) for r in rows]
    if evidence:
        unit = query_vector / max(float(np.linalg.norm(query_vector)), 1e-12)
        for hit, row in zip(hits, rows, strict=True):
            chunk_vector = np.asarray(row["vector"], dtype=np.float32)
            cosine = float(chunk_vector @ unit) / max(float(np.linalg.norm(chunk_vector)), 1e-12)
            score = row.get("_score")
            hit.evidence = Evidence(cosine, None if score is None else float(score))
    return hits
