"""Which chunk of a well-ranked document answers: a second stage after the fused score.

The fused score (rerank.py) ranks documents well, but inside one long document (a licence, a
manual) the chunk it puts first is often the one closest to the question as a whole, title words
included ("GPL 3: is an entry in my program's menu enough to show the legal notices?" is close to
the licence's preamble and "how to apply" text), while the clause that answers names the one word
that matters ("menu") and ranks fifth. Here the chunks of each of the first documents are
re-ordered among the places that document already holds, by their fused score plus the question's
words scored over that document's own candidates: a word every chunk of the document has counts
for nothing, one only the answering clause has for much. The order of documents does not change,
nor any place's score, so what the legs and the title signal chose stays; only which of a
document's chunks stands in each of its places. Words of the document's title are left out (they
name the document, not the clause). Costs a pass over those documents' candidate text, no model.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Sequence

from mcp_analysis.search.excerpt import query_terms
from mcp_analysis.search.hybrid import Hit

LEADING_DOCUMENTS = 5  # only the first documents' chunks are re-ordered: a result shows at most this many


def _held(texts: Sequence[str], terms: Sequence[str]) -> list[set[str]]:
    """The terms each text holds, matched as the excerpt matches them: a stem of 3+ letters begins a
    word ("read": readable), a shorter one is the word. One scan of each text for all of them; longer
    stems come first, so a word both begin is credited to the longer."""
    ordered = sorted(dict.fromkeys(terms), key=len, reverse=True)
    pattern = re.compile(r"\b(?:" + "|".join(re.escape(t) + ("" if len(t) >= 3 else r"\b") for t in ordered) + ")")
    return [set(pattern.findall(text.lower())) for text in texts]


def _idf(held: int, n: int) -> float:
    return math.log(1.0 + (n - held + 0.5) / (held + 0.5))


def clause_scores(bags: Sequence[set[str]], terms: Sequence[str], rarity: Sequence[float]) -> list[float]:
    """Each bag's share (0..1) of the `terms`, each term weighted by its `rarity` and by how few of `bags`
    hold it (BM25's idf over these bags alone): one rare word of a long question is a small share."""
    n = len(bags)
    weights = [r * _idf(sum(t in bag for bag in bags), n) for t, r in zip(terms, rarity, strict=True)]
    total = sum(weights) or 1.0
    return [sum(w for t, w in zip(terms, weights, strict=True) if t in bag) / total for bag in bags]


def within_documents(ranked: Sequence[Hit], query: str, title_of: Callable[[str], str], weight: float) -> list[Hit]:
    """`ranked` with the chunks of each of its first LEADING_DOCUMENTS documents re-ordered among that
    document's places by score + `weight` x their clause score; each place keeps its score."""
    out = list(ranked)
    if not weight:
        return out
    places: dict[str, list[int]] = {}
    for index, hit in enumerate(ranked):
        doc_id = hit.chunk.document_id
        if doc_id in places or len(places) < LEADING_DOCUMENTS:
            places.setdefault(doc_id, []).append(index)
    question = query_terms(query)
    if not question:
        return out
    bags = _held([" ".join([*h.chunk.headings, h.chunk.content]) for h in ranked], question)
    rarity = {t: _idf(sum(t in bag for bag in bags), len(bags)) for t in question}  # over every candidate
    for doc_id, slots in places.items():
        naming = set(query_terms(title_of(doc_id)))
        terms = [t for t in question if t not in naming]
        if len(slots) < 2 or not terms:
            continue
        hits = [ranked[i] for i in slots]
        local = clause_scores([bags[i] for i in slots], terms, [rarity[t] for t in terms])
        order = sorted(range(len(hits)), key=lambda j: (-(hits[j].score + weight * local[j]), j))
        scores = [ranked[i].score for i in slots]
        for slot, score, j in zip(slots, scores, order, strict=True):
            out[slot] = dataclasses.replace(hits[j], score=score)  # a copy: the caller's hits keep their scores
    return out
