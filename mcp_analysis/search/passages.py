"""From a query to search results: retrieve candidates, rank them, grow them into passages.

With `search.rerank` (the default) the hybrid query fetches a wider candidate list with each
leg's scores (hybrid.py), re-ranks it by fused evidence (rerank.py), keeps near-duplicates
of better hits out of the first places, and grows the best into passages whose anchors are
every scored candidate inside them (expand.py), so the excerpt shows the best-scoring part.
Without it (or in keyword mode): RRF order, one anchor per passage.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from mcp_analysis.config import SearchSettings
from mcp_analysis.search.budget import rank_share
from mcp_analysis.search.expand import expand_hits
from mcp_analysis.search.hybrid import hybrid_search
from mcp_analysis.search.models import SearchResult
from mcp_analysis.search.rerank import distinct, rerank
from mcp_analysis.store.database import Store
from mcp_analysis.store.models import DocumentMeta

CANDIDATES = 30  # rows per leg of the hybrid query when re-ranking (up to twice as many candidates)


async def search_passages(
    store: Store,
    vector: np.ndarray | None,
    query: str,
    limit: int,
    prefilter: str | None,
    visible: Mapping[str, DocumentMeta],
    settings: SearchSettings,
) -> list[SearchResult]:
    """The `limit` best passages for `query` among the `visible` documents."""
    # Over-fetch a little: merged neighbours and unfinished documents drop out in expansion.
    head = 2 * limit + 5
    options = {"ef": settings.ann_ef, "refine_factor": settings.ann_refine_factor}
    if not settings.rerank or vector is None:
        hits = await hybrid_search(store, vector, query, head, prefilter, **options)
        return await expand_hits(store, hits, visible.get, settings.max_context_chars, limit)
    candidates = await hybrid_search(store, vector, query, max(CANDIDATES, head), prefilter, evidence=True, **options)
    ranked = rerank(candidates, query, lambda doc_id: meta.title if (meta := visible.get(doc_id)) else "")
    results = await expand_hits(
        store,
        distinct(ranked[:head], limit + 2),
        visible.get,
        settings.max_context_chars,
        limit,
        evidence=ranked[head:],
        separate=True,
    )
    for result in results:
        result.share = rank_share(result.rank)
    return results
