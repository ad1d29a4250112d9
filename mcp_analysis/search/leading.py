"""The leading documents' own chunks: candidates for the clause stage that neither leg fetched.

Both legs fetch the knowledge base's best chunks for the whole question, so inside a long
document the clause that answers (Apache-2.0's "give any other recipients ... a copy of this License" for a
question about handing over the licence text) is often not among them: other
licences' chunks take the places. After a first ranking, the first `LEADING` documents are asked
once more, both legs under a prefilter of just those documents (`VisibleDocuments.within`), for
`search.passage_candidates` chunks each; the ones not yet candidates join, and the candidates are
ranked again, so the clause stage (clauses.py) chooses among more of those documents' chunks.
One extra store query (both legs at once) per search, on one or two documents' rows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from mcp_analysis.search.hybrid import Hit, hybrid_search, view_legs
from mcp_analysis.search.settings import SearchSettings
from mcp_analysis.store.candidates import VisibleDocuments
from mcp_analysis.store.database import Store

LEADING = 2  # documents whose own chunks are fetched: the first hit's, and the second's when it differs


async def rank_with_leading(
    store: Store,
    vector: np.ndarray | None,
    query: str,
    candidates: Sequence[Hit],
    rank: Callable[[Sequence[Hit]], list[Hit]],
    prefilter: VisibleDocuments | None,
    settings: SearchSettings,
) -> list[Hit]:
    """`candidates` ranked by `rank`, then again with the first documents' own chunks nearest the
    query among them (when the fetch found any that were not candidates yet). The fetch serves the
    clause stage: with it off (`search.weight_passage` 0) nothing is fetched."""
    ranked = rank(candidates)
    if not settings.passage_candidates or not settings.weight_passage or vector is None or not ranked:
        return ranked
    leading = list(dict.fromkeys(h.chunk.document_id for h in ranked))[:LEADING]
    found = await hybrid_search(
        store,
        vector,
        query,
        settings.passage_candidates,
        VisibleDocuments.within(prefilter, leading),
        ef=settings.ann_ef,
        refine_factor=settings.ann_refine_factor,
        bare_heading_words=settings.bare_heading_words,
        view_legs=view_legs(settings),
    )
    known = {h.chunk.id for h in ranked}
    joining = [h for h in found if h.chunk.id not in known]
    return rank([*ranked, *joining]) if joining else ranked
