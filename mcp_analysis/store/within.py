"""The documents a within-document fetch may read: a ranked document's own chunks, never another's.

After ranking, the clause stage (search/clauses.py) re-orders a leading document's chunks by the
question's words, but only among the chunks the two legs fetched; in a long licence the clause
that answers is often among neither leg's best of the whole knowledge base. So search asks the
store once more, under a prefilter of just those documents (both legs, as `Store.candidates`
runs them: the vector leg and the full-text leg each under ``document_id`` isin those ids). The
ids come from a ranking of visible candidates, and the view is applied again here, so a document
the view hides is never read even if a caller named it.
"""

from __future__ import annotations

from collections.abc import Iterable

from mcp_analysis.store.candidates import VisibleDocuments


def documents_within(view: VisibleDocuments | None, document_ids: Iterable[str]) -> VisibleDocuments:
    """A prefilter of `document_ids` that `view` passes (all of them without a view); empty when
    it passes none, and the store then returns no candidate."""
    wanted = frozenset(document_ids)
    return VisibleDocuments.of(wanted if view is None else wanted & view.ids)
