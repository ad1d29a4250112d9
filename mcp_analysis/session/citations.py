"""Resolving the chunk ids a model cites.

Models mangle ids: brackets, quotes, a dropped or swapped character, a truncated
UUID. Each id is cleaned, matched exactly against ids this session has seen, looked
up in the store (so ids read from items.jsonl are citable — within the filter), and
otherwise repaired against seen ids when one candidate is clearly closest. Repair is
indexed (prefix bisect, rapidfuzz) and runs in a worker thread when it is large, so
500 mangled ids against 10,000 seen ones never stall other clients.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field

import anyio
from rapidfuzz import fuzz, process

from mcp_analysis.corpus import Corpus
from mcp_analysis.errors import CitationError
from mcp_analysis.session.state import AnalysisState, Citation
from mcp_analysis.text import label

UUID_RE = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_STRIP = " \t\r\n[](){}<>\"'`.,;:"
MAX_CITED = 500
MAX_SEEN = 100_000
_MIN_SCORE = 85.0
_MIN_GAP = 5.0
_OFF_LOOP_WORK = 20_000  # candidates x seen ids beyond which repair runs in a worker thread


@dataclass
class CiteOutcome:
    citations: list[Citation] = field(default_factory=list)
    repaired: dict[str, str] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)
    no_evidence: bool = False


def clean_id(raw: str) -> str:
    text = str(raw).strip().strip(_STRIP)
    text = re.sub(r"^(chunk[_ -]?id|chunk)\s*[:=#]\s*", "", text, flags=re.IGNORECASE)
    text = text.strip(_STRIP).lower()
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: no id has one, and the store cannot be asked
        return ""
    return text


class SeenIds:
    """Chunk ids this session has been shown (search results, citations, code output), indexed for repair.

    Kept on the session and updated incrementally: each execution's output is scanned
    for ids once, not on every cite. Bounded to the most recent `MAX_SEEN` ids.
    """

    def __init__(self) -> None:
        self._ids: dict[str, None] = {}
        self._scanned: set[tuple[int, int]] = set()
        self._choices: list[str] | None = None
        self._sorted: list[str] | None = None

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, chunk_id: object) -> bool:
        return chunk_id in self._ids

    def add(self, chunk_id: str) -> None:
        if chunk_id in self._ids:
            return
        self._ids[chunk_id] = None
        self._choices = self._sorted = None
        if len(self._ids) > MAX_SEEN:
            del self._ids[next(iter(self._ids))]

    def update(self, state: AnalysisState) -> SeenIds:
        for chunk_id in state.citation_index:
            self.add(chunk_id)
        for results in state.searches.values():
            for hit in results:
                self.add(hit.chunk_id)
        for entry in state.executions:
            key = (state.analysis_number, entry.index)
            if key in self._scanned:
                continue
            self._scanned.add(key)
            for text in (entry.stdout, entry.value or ""):
                for match in UUID_RE.findall(text):
                    self.add(match.lower())
        return self

    def choices(self) -> list[str]:
        if self._choices is None:
            self._choices = list(self._ids)
        return self._choices

    def with_prefix(self, prefix: str, limit: int = 2) -> list[str]:
        """Up to `limit` seen ids starting with `prefix` (bisect over a sorted copy)."""
        if self._sorted is None:
            self._sorted = sorted(self._ids)
        found: list[str] = []
        position = bisect.bisect_left(self._sorted, prefix)
        while position < len(self._sorted) and len(found) < limit and self._sorted[position].startswith(prefix):
            found.append(self._sorted[position])
            position += 1
        return found


def repair_ids(candidates: list[str], seen: SeenIds) -> dict[str, str]:
    """Each candidate that is clearly one seen id, mangled: {candidate: seen id}. Ambiguous ones are left out.

    A truncated or over-long id is repaired by its unique prefix match; otherwise the closest
    seen id by normalized edit similarity (rapidfuzz, C++) must score >= 85 and beat the
    runner-up by >= 5 points.
    """
    choices = seen.choices()
    lengths = sorted({len(c) for c in choices})
    repairs: dict[str, str] = {}
    for candidate in candidates:
        if candidate in seen:
            continue
        if len(candidate) >= 8:
            prefixed = seen.with_prefix(candidate)
            longer = [candidate[:n] for n in lengths if n < len(candidate) and candidate[:n] in seen]
            matches = set(prefixed) | set(longer)
            if len(matches) == 1:
                repairs[candidate] = matches.pop()
                continue
        # The runner-up is looked for below the bar too: a close second makes the repair ambiguous.
        best = process.extract(candidate, choices, scorer=fuzz.ratio, limit=2, score_cutoff=_MIN_SCORE - _MIN_GAP)
        if best and best[0][1] >= _MIN_SCORE and (len(best) == 1 or best[0][1] - best[1][1] >= _MIN_GAP):
            repairs[candidate] = best[0][0]
    return repairs


def _from_search(state: AnalysisState) -> dict[str, Citation]:
    out: dict[str, Citation] = {}
    for results in state.searches.values():
        for hit in results:
            out.setdefault(hit.chunk_id, Citation.from_search(hit))
    return out


async def resolve_citations(
    state: AnalysisState, corpus: Corpus, chunk_ids: list[str], seen: SeenIds | None = None
) -> CiteOutcome:
    """Register `chunk_ids` as the current answer's citations (see module docs).

    `seen` is the session's index of shown ids (built from `state` when not given).
    """
    outcome = CiteOutcome()
    if len(chunk_ids) > MAX_CITED:
        raise CitationError(f"Cite at most {MAX_CITED} chunk ids per call ({len(chunk_ids)} given).")
    if not chunk_ids:
        state.citations.clear()
        outcome.no_evidence = True
        return outcome
    cleaned: list[tuple[str, str]] = [(raw, clean_id(raw)) for raw in chunk_ids]
    known = (seen if seen is not None else SeenIds()).update(state)  # an empty index is falsy
    # Exact ids (seen or not) are looked up in the store: this also enforces the filter.
    wanted = {c for _, c in cleaned if c}
    found = {chunk.id: (chunk, meta) for chunk, meta in await corpus.chunks(wanted)}
    unresolved = [(raw, c) for raw, c in cleaned if c not in found]
    candidates = list(dict.fromkeys(c for _, c in unresolved if c))
    if len(candidates) * max(1, len(known)) > _OFF_LOOP_WORK:
        fixed = await anyio.to_thread.run_sync(repair_ids, candidates, known)
    else:
        fixed = repair_ids(candidates, known)
    repairs = {raw: fixed[c] for raw, c in unresolved if c in fixed}
    if repairs:
        for chunk, meta in await corpus.chunks(set(repairs.values())):
            found[chunk.id] = (chunk, meta)
    from_search = _from_search(state)
    for raw, candidate in cleaned:
        target = candidate if candidate in found else repairs.get(raw)
        if target is None or target not in found:
            outcome.ignored.append(raw)
            continue
        if target != candidate:
            outcome.repaired[raw] = target
        chunk, meta = found[target]
        shown = from_search.get(target)
        # The passage as the search showed it, at the document's place now (its file may have moved).
        citation = (
            shown.model_copy(update={"document_uri": meta.uri, "document_title": meta.title})
            if shown is not None
            else Citation.from_chunk(chunk, meta)
        )
        state.citation_index[target] = citation
        if target not in state.citations:
            state.citations.append(target)
            outcome.citations.append(citation)
        elif citation not in outcome.citations:
            outcome.citations.append(citation)
    if not outcome.citations:
        shown = ", ".join(repr(label(r, 60)) for r in chunk_ids[:5]) + (", ..." if len(chunk_ids) > 5 else "")
        raise CitationError(
            f"None of the chunk ids could be resolved ({shown}). Cite chunk_id values exactly as returned "
            "by search (or from chunk_ids in items.jsonl / toc.json), or call cite([]) if the answer "
            "is not based on the knowledge base."
        )
    return outcome
