"""Re-ranking hybrid candidates by what each leg measured, and by the document a query names.

RRF (hybrid.py) fuses ranks only: a chunk the full-text leg ranks first for a common word
beats one whose meaning is much closer, and two versions of one text (GPL-2 and GPL-3,
v1 and v2 of a manual) rank by chance. The fused score here weighs, for each candidate:

- its vector's cosine to the query's (meaning),
- its full-text score (the words; 0 when that leg missed it), half relative to the best
  candidate's and half saturating (score / (score + 3 x the candidates' median)), so one chunk
  whose BM25 score stands far above the rest (a long guide naming every word) neither takes the
  whole keyword weight nor flattens every other candidate's,
- how much of its document's title the query names (a version, a product: "MPL 2.0",
  "GPLv3", "libffi closures"), title words weighted by how rare they are among the candidates'
  titles, so "license" in every title counts for little and "2.0" for much; a title carrying
  another version than the one the query names loses part of it ("GPL 2": GPL-3, LGPL-2.1),
- with `distinct`, the query's words scored (BM25) over the best candidates themselves, so a word
  every near-duplicate shares counts for nothing and one that tells them apart for much.

The chunk nearest the query in meaning then takes at least place `nearest_place` unless it
stands there or before (without `nearest_by_chunk`: any chunk of its document; `place_nearest`).
Then, with `passage`, the chunks of each of the first documents are re-ordered among that
document's places by the question's words over its own chunks (clauses.py), so the clause that
answers stands first. Candidates whose text repeats a better one of another document almost
word for word are moved after the others (`distinct`), so the first hits are distinct passages,
each under its own title. Costs no model call: the vectors and scores come with the query's rows.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mcp_analysis.search.clauses import within_documents
from mcp_analysis.search.hybrid import Hit


@dataclass(frozen=True)
class Weights:
    """How much each signal counts in the fused score (settings search.weight_*; `version` is
    search.weight_version, `passage` search.weight_passage). Chosen with bench/rank_sweep.py on the
    tuning question sets (docs/ranking.md)."""

    vector: float = 0.5
    keyword: float = 0.25
    title: float = 0.2
    distinct: float = 0.06  # BM25 of the question over the best candidates themselves (see `distinctive`)
    version: float = 0.75  # share of its title signal a title of another release than the query names loses
    passage: float = 0.0  # second stage: the question's words over a document's own chunks (clauses.py; off)
    nearest_place: int = 3  # the chunk nearest in meaning takes at least this place (`place_nearest`; 0 = off)
    nearest_by_chunk: bool = True  # ... unless it stands there (else: unless a chunk of its document does)


WEIGHTS = Weights()
DISTINCT_AMONG = 20  # the distinctive-terms signal re-scores this many best candidates (bounds its cost)
KEYWORD_SATURATION = 3.0  # the saturating half of the full-text signal is 1/2 at this many times the median
CACHED_TITLE_CHARS = 1000  # longer titles are named anew each time (the cache's memory stays small)
DUPLICATE_OVERLAP = 0.5  # share of the shorter chunk's word 5-grams two chunks share: near-duplicates
_TOKEN = re.compile(r"[a-z]+|\d+(?:\.\d+)*")
_VERSIONED = re.compile(r"\b([a-z]{2,})v(\d+(?:\.\d+)*)\b")  # "gplv3" -> "gpl 3", not "csv2json"
_VERSION_AFTER_LETTERS = re.compile(r"[a-z]v\d")  # what every match of _VERSIONED holds
_VERSION_WORDS = frozenset({"version", "v", "release", "rev", "revision"})  # "version 2 of the GPL"
_YEAR_DIGITS = 4  # a number with this many digits before its first dot is a year or a count, no version
_WORD = re.compile(r"[a-z]+")
_K1, _B = 1.2, 0.75  # BM25's usual constants


def tokens(text: str) -> list[str]:
    """Words and numbers as names use them ("GPLv3" -> gpl, 3; "2.0" -> 2)."""
    return [_bare(token) for token in _raw_tokens(text)]


def token_counts(text: str) -> tuple[int, Counter[str]]:
    """How many `tokens(text)` there are, and how often each: counted in C, not token by token in
    Python (the distinctive-terms signal counts a score of candidates' texts in every search), then
    only the distinct tokens ending in ".0" are named as `tokens` names them."""
    found = _raw_tokens(text)
    counts = Counter(found)
    if ".0" in text:
        for token in [t for t in counts if t.endswith(".0")]:
            counts[_bare(token)] += counts.pop(token)
    return len(found), counts


def _raw_tokens(text: str) -> list[str]:
    lowered = text.lower()
    if _VERSION_AFTER_LETTERS.search(lowered):  # a scan 3x faster than the substitution, which rarely applies
        lowered = _VERSIONED.sub(r"\1 \2", lowered)
    return _TOKEN.findall(lowered)


def _bare(token: str) -> str:
    """A version number without its trailing ".0"s ("2.0" and "2" name the same release)."""
    while token.endswith(".0"):
        token = token[:-2]
    return token


@dataclass(frozen=True)
class Names:
    """What a text can name a document by: its words and numbers ("gplv3" -> gpl, 3; "2.0" -> 2),
    and the initials of each run of 2-4 words with the words they stand for ("mpl": Mozilla
    Public License)."""

    words: frozenset[str]
    acronyms: dict[str, frozenset[str]]
    versions: frozenset[str]  # the words that are version numbers, found once per text

    @classmethod
    def of(cls, text: str) -> Names:
        words = set(tokens(text))
        plain = _WORD.findall(_VERSIONED.sub(r"\1 \2", text.lower()))
        acronyms = {
            "".join(w[0] for w in plain[i : i + n]): frozenset(plain[i : i + n])
            for n in (2, 3, 4)
            for i in range(len(plain) - n + 1)
        }
        return cls(frozenset(words), acronyms, frozenset(w for w in words if _is_version(w)))


def title_names(title: str) -> Names:
    """`Names.of` a title, cached (titles of up to CACHED_TITLE_CHARS): the same documents' titles come
    back query after query."""
    return _cached_names(title) if len(title) <= CACHED_TITLE_CHARS else Names.of(title)


@functools.lru_cache(maxsize=4096)
def _cached_names(title: str) -> Names:
    return Names.of(title)


def title_match(query: Names, title: Names, idf: Callable[[str], float]) -> float:
    """Share of the title's information (idf-weighted words) that the query names, 0..1: a title word
    the query says or abbreviates, or the words of a title abbreviation the query says."""
    named = {w for w in title.words if w in query.words or w in query.acronyms}
    for acronym, words in title.acronyms.items():
        if acronym in query.words:
            named |= words & title.words
    total = sum(idf(w) for w in title.words)
    return sum(idf(w) for w in named) / total if total else 0.0


def _is_version(token: str) -> bool:
    return token[0].isdigit() and len(token.split(".")[0]) < _YEAR_DIGITS


def _within(named: str, version: str) -> bool:
    """Whether `version` is a release of the line the query names: "3" takes in "3.12"; "2.1"
    does not take in "2", nor "2" take in "21" or "2.7"... only "2.x"."""
    return version == named or version.startswith(named + ".")


def named_versions(query: str, titles: dict[str, Names]) -> set[tuple[str, str]]:
    """(name, number) for each number the query puts right after a word that names a candidate's
    title ("GPL 2", "Debian 12", "version 3"): "2 GPUs", "top 10" or a year name no version."""
    naming = set(_VERSION_WORDS)
    for title in titles.values():
        naming |= title.words | title.acronyms.keys()
    words = tokens(query)
    return {
        (word, number)
        for word, number in itertools.pairwise(words)
        if word in naming and not word[0].isdigit() and _is_version(number)
    }


def _of_line(name: str, number: str, title: Names) -> bool:
    """Whether `title` is a release of the line "`name` `number`": it names `name` (or `name` is a
    word like "version") and carries a number of that line."""
    names = name in _VERSION_WORDS or name in title.words or name in title.acronyms
    return names and any(_within(number, v) for v in title.versions)


def version_conflicts(query: str, titles: dict[str, Names]) -> set[str]:
    """The documents whose title carries a version but is no release of the line the query names,
    when some candidate's title is ("GPL 2": GPL-3 and LGPL-2.1 conflict; GPL-2 and a title without
    numbers do not; "Python 3": Python 3.12 is of the line, Python 2.7 is not)."""
    lines = [(n, v) for n, v in named_versions(query, titles) if any(_of_line(n, v, t) for t in titles.values())]
    if not lines:
        return set()
    return {d for d, t in titles.items() if t.versions and not any(_of_line(name, number, t) for name, number in lines)}


def distinctive(texts: Sequence[str], query: str) -> list[float]:
    """BM25 of the question's words over `texts` with the texts' own statistics, relative to the best
    (0..1): a word every candidate has ("license", "software") counts for nothing, one that tells
    near-duplicates apart ("2", "linking", "notice") for much."""
    terms = list(dict.fromkeys(tokens(query)))  # in the query's order: the same sums in every process
    if not texts or not terms:
        return [0.0] * len(texts)
    bags = [token_counts(text) for text in texts]
    counts = [{t: bag[t] for t in terms if t in bag} for _, bag in bags]
    lengths = [length for length, _ in bags]
    average = sum(lengths) / len(bags) or 1.0
    n = len(bags)

    def idf(term: str) -> float:
        df = sum(term in c for c in counts)
        return math.log(1.0 + (n - df + 0.5) / (df + 0.5))

    weights = {t: idf(t) for t in terms}
    scores = [
        sum(weights[t] * tf * (_K1 + 1) / (tf + _K1 * (1 - _B + _B * length / average)) for t, tf in c.items())
        for length, c in zip(lengths, counts, strict=True)
    ]
    best = max(scores) or 1.0
    return [score / best for score in scores]


def keyword_scale(scores: Sequence[float]) -> Callable[[float], float]:
    """Full-text scores to 0..1: half relative to the best of `scores`, half saturating at
    KEYWORD_SATURATION times their median (of those the full-text leg found, > 0)."""
    best = max(scores, default=0.0) or 1.0
    found = sorted(s for s in scores if s > 0)
    knee = KEYWORD_SATURATION * (found[len(found) // 2] if found else 1.0)
    return lambda score: 0.5 * score / best + 0.5 * score / (score + knee) if score > 0 else 0.0


def rerank(
    hits: Sequence[Hit],
    query: str,
    title_of: Callable[[str], str],
    weights: Weights = WEIGHTS,
    name_of: Callable[[str], str] | None = None,
) -> list[Hit]:
    """`hits` (with evidence) best-first by fused score; each hit's score becomes that score.
    `name_of`: what else names a document (its file name), for the distinctive-terms signal."""
    scored = [h for h in hits if h.evidence is not None]
    if not scored:
        return list(hits)
    titles = {doc_id: title_names(title_of(doc_id)) for doc_id in {h.chunk.document_id for h in scored}}
    frequency: dict[str, int] = {}
    for title in titles.values():
        for word in title.words:
            frequency[word] = frequency.get(word, 0) + 1

    def idf(token: str) -> float:
        return math.log(1.0 + len(titles) / frequency.get(token, 1))

    names = Names.of(query)
    match = {doc_id: title_match(names, title, idf) for doc_id, title in titles.items()}
    for doc_id in version_conflicts(query, titles):
        match[doc_id] *= 1.0 - weights.version
    keyword = keyword_scale([h.evidence.keyword or 0.0 for h in scored if h.evidence])
    for hit in scored:
        evidence = hit.evidence
        assert evidence is not None
        hit.score = (
            weights.vector * evidence.cosine
            + weights.keyword * keyword(evidence.keyword or 0.0)
            + weights.title * match[hit.chunk.document_id]
        )
    if weights.distinct:
        best = sorted(scored, key=lambda h: -h.score)[:DISTINCT_AMONG]
        named = {doc_id: f"{title_of(doc_id)} {name_of(doc_id) if name_of else ''}" for doc_id in titles}
        fields = [" ".join([*h.chunk.headings, named[h.chunk.document_id], h.chunk.content]) for h in best]
        for hit, distinct_terms in zip(best, distinctive(fields, query), strict=True):
            hit.score += weights.distinct * distinct_terms
    order = sorted(range(len(scored)), key=lambda i: (-scored[i].score, i))
    ranked = place_nearest([scored[i] for i in order], weights.nearest_place, weights.nearest_by_chunk)
    return within_documents(ranked, query, title_of, weights.passage)


def place_nearest(ranked: list[Hit], place: int, by_chunk: bool = True) -> list[Hit]:
    """`ranked` with the chunk nearest the question in meaning (the best cosine, the vector leg's first)
    moved up to `place` (1-based) when it does not stand there or before (without `by_chunk`: when no
    chunk of its document does); it takes the score of the hit whose place it takes. The other signals
    (the words, a title the question names) can bury the one page that means what the question asks in
    other words under pages that share its words ("count tokens for a given OpenAI model": the OpenAI
    README over tiktoken's), and, inside the leading document, the clause that answers under clauses
    that share more of the question's words (GFDL's "you may omit a network location" for "can I leave
    out the web address of an old edition"); this keeps the embedder's best guess in view without
    letting it push out the first hits."""
    if place < 1 or len(ranked) <= place:
        return ranked
    nearest = max(ranked, key=lambda h: h.evidence.cosine if h.evidence else float("-inf"))
    head = ranked[:place]
    if any(h is nearest or (not by_chunk and h.chunk.document_id == nearest.chunk.document_id) for h in head):
        return ranked
    out = [h for h in ranked if h is not nearest]
    nearest.score = out[place - 1].score
    out.insert(place - 1, nearest)
    return out


def _shingles(text: str) -> set[tuple[str, ...]]:
    words = _WORD.findall(text.lower())
    return set(zip(words, words[1:], words[2:], words[3:], words[4:], strict=False)) or {tuple(words)}


def distinct(hits: Sequence[Hit], wanted: int, overlap: float = DUPLICATE_OVERLAP) -> list[Hit]:
    """`hits` in order, except that one repeating a better kept hit of another document (half the
    word 5-grams of the shorter of the two) moves after the others. Checks stop once `wanted`
    hits repeat nothing."""
    kept: list[Hit] = []
    repeats: list[Hit] = []
    seen: list[tuple[str, set[tuple[str, ...]]]] = []
    for index, hit in enumerate(hits):
        if len(kept) >= wanted:
            return kept + list(hits[index:]) + repeats
        grams = _shingles(hit.chunk.content)
        if any(
            doc_id != hit.chunk.document_id and len(grams & other) >= overlap * min(len(grams), len(other))
            for doc_id, other in seen
        ):
            repeats.append(hit)
        else:
            kept.append(hit)
            seen.append((hit.chunk.document_id, grams))
    return kept + repeats
