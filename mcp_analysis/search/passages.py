"""From a query to search results: retrieve candidates, rank them, grow them into passages.

The store returns each leg's `search.candidates` best chunks with both legs' scores (hybrid.py,
store/candidates.py). With `search.rerank` (the default) they are re-ranked by fused evidence
(rerank.py), near-duplicates of better hits are kept out of the first places, and the best
grow into passages whose anchors are every scored candidate inside them (expand.py), so the
excerpt shows the best-scoring part. Without it (or in keyword mode): RRF order, one anchor
per passage.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from mcp_analysis.search.budget import rank_share
from mcp_analysis.search.expand import expand_hits
from mcp_analysis.search.hybrid import Hit, hybrid_search, view_legs
from mcp_analysis.search.leading import rank_with_leading
from mcp_analysis.search.models import SearchResult
from mcp_analysis.search.rerank import Weights, distinct, rerank
from mcp_analysis.search.settings import SearchSettings
from mcp_analysis.store.candidates import VisibleDocuments
from mcp_analysis.store.database import Store
from mcp_analysis.store.models import DocumentMeta


async def search_passages(
    store: Store,
    vector: np.ndarray | None,
    query: str,
    limit: int,
    prefilter: VisibleDocuments | None,
    visible: Mapping[str, DocumentMeta],
    settings: SearchSettings,
) -> list[SearchResult]:
    """The `limit` best passages for `query` among the `visible` documents."""
    # Over-fetch a little: merged neighbours and unfinished documents drop out in expansion.
    head = 2 * limit + 5
    candidates = await _candidates(store, vector, query, head, prefilter, settings)
    if not settings.rerank or vector is None:
        return await expand_hits(store, candidates[:head], visible.get, settings.max_context_chars, limit)
    weights = Weights(
        settings.weight_vector,
        settings.weight_keyword,
        settings.weight_title,
        settings.weight_distinct,
        settings.weight_version,
        settings.weight_passage,
        settings.nearest_place,
        settings.nearest_by_chunk,
    )
    ranked = await rank_with_leading(
        store,
        vector,
        query,
        candidates,
        lambda hits: rerank(
            hits,
            query,
            lambda doc_id: ranking_title(visible.get(doc_id), settings.page_title),
            weights,
            lambda doc_id: meta.uri.rsplit("/", 1)[-1] if (meta := visible.get(doc_id)) else "",
        ),
        prefilter,
        settings,
    )
    results = await expand_hits(
        store,
        distinct(ranked[:head], limit + 2, settings.duplicate_overlap),
        visible.get,
        settings.max_context_chars,
        limit,
        evidence=ranked[head:],
        separate=True,
    )
    for result in results:
        result.share = rank_share(result.rank)
    return results


def ranking_title(meta: DocumentMeta | None, page_title: bool) -> str:
    """The title a document is ranked by: its page title (what an HTML page's ``<title>`` calls it, naming
    the manual or site its first heading leaves out) with `search.page_title`, else its title."""
    if meta is None:
        return ""
    named = meta.metadata.get("page_title") if page_title else None
    return named if isinstance(named, str) and named.strip() else meta.title


async def _candidates(
    store: Store,
    vector: np.ndarray | None,
    query: str,
    head: int,
    prefilter: VisibleDocuments | None,
    settings: SearchSettings,
) -> list[Hit]:
    """Each leg's `search.candidates` best chunks, fused. In keyword mode (no `vector`) nothing
    re-ranks them: the hits are the full-text leg's first `head` in its order, so the leg is asked
    for `head` rows (a longer posting-list walk and read costs what LanceDB's whole query does at a
    million chunks), and for all of them only when bare headings joining their sections left fewer."""

    async def fetch(per_leg: int) -> list[Hit]:
        return await hybrid_search(
            store,
            vector,
            query,
            per_leg,
            prefilter,
            ef=settings.ann_ef,
            refine_factor=settings.ann_refine_factor,
            bare_heading_words=settings.bare_heading_words,
            view_legs=view_legs(settings),
        )

    if vector is None and head < settings.candidates:
        hits = await fetch(head)
        if len(hits) >= head:
            return hits
    return await fetch(max(settings.candidates, head))
