"""The part of a search hit worth showing: a window of its passage around the match.

A hit's passage (the chunk grown with its section, see expand.py) is up to
``search.max_context_chars`` long; a model judging five hits needs far less of each. With
scored anchors (every re-ranked candidate inside the passage, see rerank.py) the window goes
where the best-scoring chunks are, that is where the passage is closest to the question in
meaning (their vectors' cosine weighs most in that score), and the query's words place it
within them; a question in other words than the passage's still gets its answering chunk.
Without them it goes where the query's words are densest, preferring the matched chunk.
Cuts fall at line, sentence or word boundaries. No model is involved here: it is a few
hundred string comparisons per hit.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Sequence

from mcp_analysis.text import ELLIPSIS

_WORD = re.compile(r"\w+")
_BREAK = re.compile(r"\n|(?<=[.!?:;])\s")
_BLANK_LINES = re.compile(r"\n\s*\n+")
_STOPWORDS = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "does", "for", "from", "how", "i", "in", "into",
    "is", "it", "its", "me", "my", "of", "on", "or", "so", "that", "the", "this", "to", "use", "using", "was",
    "what", "when", "where", "which", "who", "why", "will", "with", "without", "you", "your",
})  # fmt: skip
_SUFFIXES = ("ing", "ies", "es", "ed", "ly", "s")


def _stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word


def query_terms(query: str) -> list[str]:
    """Distinct stems of the query's content words (stop words and 1-letter words dropped)."""
    words = [w for w in _WORD.findall(query.lower()) if len(w) > 1 and w not in _STOPWORDS]
    return list(dict.fromkeys(_stem(w) for w in words))


# Tuned on bench/data/passages_queries.json's tune split (bench/passages.py measures them).
ANCHOR_TEMPERATURE = 0.02  # a scored hit this much below the best one counts 1/e as much
ANCHOR_WEIGHT = 24.0  # of a wholly shown best anchor, against 4 per distinct query word in view


def excerpt(
    text: str,
    query: str,
    size: int,
    anchor: tuple[int, int] | None = None,
    *,
    anchors: Sequence[tuple[int, int, float]] = (),
) -> str:
    """At most `size` characters of `text` around the best match of `query` ("…" marks cuts).

    `anchor` is the (start, end) of the matched chunk inside `text`; windows overlapping it
    score higher, and with no query word in the text the window starts at it. `anchors`
    (start, end, score) are all scored hits inside `text`: windows overlapping the better ones
    score higher, in proportion to exp((score - best) / ANCHOR_TEMPERATURE).
    """
    if len(text) <= size:
        return tidy(text)
    size = max(size, 40)
    lo, hi = anchor if anchor else (0, len(text))
    weighted = _weights(anchors) if anchors else [(lo, hi, 1.0)]
    if anchors:
        lo, hi = max(anchors, key=lambda a: a[2])[:2]
    terms = query_terms(query)
    hits: list[int] = []  # positions of words matching a query term (a term of 3+ letters matches as a prefix)
    kinds: list[int] = []  # which term
    if terms:
        pattern = "|".join(re.escape(t) + (r"\w*" if len(t) >= 3 else r"\b") for t in terms)
        for match in re.finditer(rf"(?<!\w)(?:{pattern})", text.lower()):
            word = match.group()
            hits.append(match.start())
            kinds.append(next(i for i, t in enumerate(terms) if word == t or (len(t) >= 3 and word.startswith(t))))
    # A word the passage repeats everywhere says less about where the answer is than a rare one.
    weight = [(1.0 + math.log(2.0)) / (1.0 + math.log1p(kinds.count(i))) for i in range(len(terms))]
    room = size - 2  # the ellipses
    starts = {0, lo, max(0, len(text) - room)}
    starts.update(m.end() for m in _BREAK.finditer(text))
    best_start, best_score = lo, float("-inf")
    for start in sorted(s for s in starts if 0 <= s <= len(text) - 1):
        end = min(len(text), start + room)
        first, last = bisect.bisect_left(hits, start), bisect.bisect_left(hits, end)
        distinct = sum(weight[k] for k in set(kinds[first:last]))
        overlap = sum(w * max(0, min(end, b) - max(start, a)) / max(1, min(room, b - a)) for a, b, w in weighted)
        # With scored anchors, how much of the best-scoring chunks is in view matters most, then the
        # distinct query words (weighted by rarity); without, the words matter most, then the matched
        # chunk. Then repeated words; starting near the (best) chunk breaks ties.
        score = 4.0 * distinct + (ANCHOR_WEIGHT if anchors else 3.0) * overlap + min(last - first, 2 * len(terms)) * 0.5
        score -= abs(start - lo) / (10.0 * len(text))
        if score > best_score:
            best_start, best_score = start, score
    return _cut(text, best_start, room)


def _weights(anchors: Sequence[tuple[int, int, float]]) -> list[tuple[int, int, float]]:
    best = max(score for _, _, score in anchors)
    return [(a, b, math.exp((score - best) / ANCHOR_TEMPERATURE)) for a, b, score in anchors]


def _cut(text: str, start: int, room: int) -> str:
    end = min(len(text), start + room)
    if end < len(text):
        space = text.rfind(" ", start + room // 2, end)
        newline = text.rfind("\n", start + room // 2, end)
        end = max(space, newline) if max(space, newline) > 0 else end
    body = text[start:end].strip()
    return tidy((ELLIPSIS if start > 0 else "") + body + (ELLIPSIS if end < len(text) else ""))


def tidy(text: str) -> str:
    """One newline between paragraphs is enough for a model to read (blank lines cost characters)."""
    return _BLANK_LINES.sub("\n", text.strip())
