"""Re-ranking hybrid candidates by what each leg measured, and by the document a query names.

RRF (hybrid.py) fuses ranks only: a chunk the full-text leg ranks first for a common word
beats one whose meaning is much closer, and two versions of one text (GPL-2 and GPL-3,
v1 and v2 of a manual) rank by chance. The fused score here weighs, for each candidate:

- its vector's cosine to the query's (meaning),
- its full-text score relative to the best candidate's (the words; 0 when that leg missed it),
- how much of its document's title the query names (a version, a product: "MPL 2.0",
  "GPLv3", "libffi closures"), title words weighted by how rare they are among the candidates'
  titles, so "license" in every title counts for little and "2.0" for much.

Candidates whose text repeats a better one of another document almost word for word are
moved after the others, so the first hits are distinct passages, each under its own title.
Costs no model call: the vectors and scores come with the query's rows.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mcp_analysis.search.hybrid import Hit


@dataclass(frozen=True)
class Weights:
    """How much each signal counts in the fused score (tuned on bench/data/passages_queries.json's tune split)."""

    vector: float = 0.5
    keyword: float = 0.2
    title: float = 0.2


WEIGHTS = Weights()
DUPLICATE_OVERLAP = 0.5  # share of a chunk's word 5-grams found in a better hit: a near-duplicate passage
_TOKEN = re.compile(r"[a-z]+|\d+(?:\.\d+)*")
_VERSIONED = re.compile(r"([a-z]{2,})v(\d)")  # "gplv3" -> "gpl 3"
_WORD = re.compile(r"[a-z]+")


def _tokens(text: str) -> set[str]:
    out = set()
    for token in _TOKEN.findall(_VERSIONED.sub(r"\1 \2", text.lower())):
        while token.endswith(".0"):  # "2.0" names the same version as "2"
            token = token[:-2]
        out.add(token)
    return out


def query_names(query: str) -> set[str]:
    """The query's words and numbers, plus the initials of each run of 2-4 words
    ("Mozilla Public License" also names "mpl")."""
    names = _tokens(query)
    words = _WORD.findall(query.lower())
    for n in (2, 3, 4):
        names.update("".join(w[0] for w in words[i : i + n]) for i in range(len(words) - n + 1))
    return names


def title_match(names: set[str], title: set[str], idf: Callable[[str], float]) -> float:
    """Share of the title's information (idf-weighted tokens) that the query names, 0..1."""
    total = sum(idf(t) for t in title)
    return sum(idf(t) for t in title if t in names) / total if total else 0.0


def rerank(hits: Sequence[Hit], query: str, title_of: Callable[[str], str], weights: Weights = WEIGHTS) -> list[Hit]:
    """`hits` (with evidence) best-first by fused score; each hit's score becomes that score."""
    scored = [h for h in hits if h.evidence is not None]
    if not scored:
        return list(hits)
    titles = {doc_id: _tokens(title_of(doc_id)) for doc_id in {h.chunk.document_id for h in scored}}
    frequency: dict[str, int] = {}
    for tokens in titles.values():
        for token in tokens:
            frequency[token] = frequency.get(token, 0) + 1

    def idf(token: str) -> float:
        return math.log(1.0 + len(titles) / frequency.get(token, 1))

    names = query_names(query)
    match = {doc_id: title_match(names, tokens, idf) for doc_id, tokens in titles.items()}
    best_keyword = max((h.evidence.keyword or 0.0 for h in scored if h.evidence), default=0.0) or 1.0
    for hit in scored:
        evidence = hit.evidence
        assert evidence is not None
        hit.score = (
            weights.vector * evidence.cosine
            + weights.keyword * (evidence.keyword or 0.0) / best_keyword
            + weights.title * match[hit.chunk.document_id]
        )
    order = sorted(range(len(scored)), key=lambda i: (-scored[i].score, i))
    return [scored[i] for i in order]


def _shingles(text: str) -> set[tuple[str, ...]]:
    words = _WORD.findall(text.lower())
    return set(zip(words, words[1:], words[2:], words[3:], words[4:], strict=False)) or {tuple(words)}


def distinct(hits: Sequence[Hit], wanted: int) -> list[Hit]:
    """`hits` in order, except that one repeating a better hit of another document (most of its
    word 5-grams) moves after the others. Checks stop once `wanted` hits repeat nothing."""
    kept: list[Hit] = []
    repeats: list[Hit] = []
    seen: list[tuple[str, set[tuple[str, ...]]]] = []
    for index, hit in enumerate(hits):
        if len(kept) >= wanted:
            return kept + list(hits[index:]) + repeats
        grams = _shingles(hit.chunk.content)
        if any(
            doc_id != hit.chunk.document_id and len(grams & other) >= DUPLICATE_OVERLAP * min(len(grams), len(other))
            for doc_id, other in seen
        ):
            repeats.append(hit)
        else:
            kept.append(hit)
        seen.append((hit.chunk.document_id, grams))
    return kept + repeats
