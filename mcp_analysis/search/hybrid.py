"""Hybrid retrieval: the store's vector and full-text candidates, fused by reciprocal rank (RRF).

The store runs both legs as separate queries, `per_leg` rows each, kept to the documents a
filtered view passes (under their prefilter, or as `ViewLegs` chooses for the view: an exact scan
of a few chunks, unfiltered legs that keep the view's rows), so filtered-out documents never take
a slot (store/candidates.py). Every hit carries what the legs measured (its vector's cosine to the
query's, its full-text score), which re-ranking (rerank.py) fuses by value, not by rank.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mcp_analysis.search.settings import SearchSettings
from mcp_analysis.store.candidates import Candidate, ViewLegs, VisibleDocuments
from mcp_analysis.store.database import Store
from mcp_analysis.store.models import ChunkRecord


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


def view_legs(settings: SearchSettings) -> ViewLegs:
    """How the store's legs keep to a view, and which engine runs them, by the search settings."""
    return ViewLegs(
        settings.flat_search_max_rows,
        settings.post_filter_min_share,
        settings.scanner_min_chunks,
        settings.sampled_vector_min_chunks,
    )


RRF_K = 60  # the usual constant of reciprocal rank fusion (LanceDB's default too)


def rrf(candidate: Candidate) -> float:
    """Reciprocal rank fusion of the legs that found `candidate`: sum of 1 / (60 + rank)."""
    ranks = (candidate.vector_rank, candidate.keyword_rank)
    return sum(1.0 / (RRF_K + rank) for rank in ranks if rank is not None)


async def hybrid_search(
    store: Store,
    vector: np.ndarray | None,
    query: str,
    per_leg: int,
    prefilter: VisibleDocuments | None,
    *,
    ef: int,
    refine_factor: int,
    bare_heading_words: int = 3,
    view_legs: ViewLegs | None = None,
) -> list[Hit]:
    """Every candidate of both legs (up to 2 x `per_leg`), best RRF first, with its evidence.

    With an HNSW index (large knowledge bases), `ef` widens the graph search and
    `refine_factor` re-ranks candidates with exact distances; without one the vector leg
    is an exact scan and both are ignored (the settings search.ann_ef and search.ann_refine_factor
    are their only defaults). Without a `vector` (keyword mode) only the
    full-text leg runs, and hits carry no evidence."""
    found = await store.candidates(
        query,
        vector,
        per_leg,
        prefilter,
        ef=ef,
        refine_factor=refine_factor,
        bare_heading_words=bare_heading_words,
        view_legs=view_legs,
    )
    hits = []
    for candidate in found:
        evidence = None if candidate.cosine is None else Evidence(candidate.cosine, candidate.keyword)
        hits.append(Hit(ChunkRecord.from_row(candidate.row), rrf(candidate), evidence))
    order = sorted(range(len(hits)), key=lambda i: (-hits[i].score, i))
    return [hits[i] for i in order]
