"""Resolving the chunk ids a model cites.

Models mangle ids: brackets, quotes, a dropped or swapped character, a truncated
UUID. Each id is cleaned, matched exactly against ids this session has seen, looked
up in the store (so ids read from items.jsonl are citable — within the filter), and
otherwise repaired against seen ids when one candidate is clearly closest.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from mcp_analysis.corpus import Corpus
from mcp_analysis.errors import CitationError
from mcp_analysis.session.state import AnalysisState, Citation

UUID_RE = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_STRIP = " \t\r\n[](){}<>\"'`.,;:"
MAX_CITED = 500


@dataclass
class CiteOutcome:
    citations: list[Citation] = field(default_factory=list)
    repaired: dict[str, str] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)
    no_evidence: bool = False


def clean_id(raw: str) -> str:
    text = str(raw).strip().strip(_STRIP)
    text = re.sub(r"^(chunk[_ -]?id|chunk)\s*[:=#]\s*", "", text, flags=re.IGNORECASE)
    return text.strip(_STRIP).lower()


def seen_ids(state: AnalysisState) -> set[str]:
    """Chunk ids this session has been shown: search results, earlier citations, code output."""
    ids = set(state.citation_index)
    for results in state.searches.values():
        ids.update(r.chunk_id for r in results)
    for entry in state.executions:
        for text in (entry.stdout, entry.value or ""):
            ids.update(m.lower() for m in UUID_RE.findall(text))
    return ids


def _repair(candidate: str, known: Iterable[str]) -> str | None:
    known = list(known)
    if len(candidate) >= 8:
        prefixed = [k for k in known if k.startswith(candidate) or candidate.startswith(k)]
        if len(prefixed) == 1:
            return prefixed[0]
    scored = sorted(((difflib.SequenceMatcher(None, candidate, k).ratio(), k) for k in known), reverse=True)
    if scored and scored[0][0] >= 0.85 and (len(scored) == 1 or scored[0][0] - scored[1][0] >= 0.05):
        return scored[0][1]
    return None


def _from_search(state: AnalysisState) -> dict[str, Citation]:
    out: dict[str, Citation] = {}
    for results in state.searches.values():
        for hit in results:
            out.setdefault(hit.chunk_id, Citation.from_search(hit))
    return out


async def resolve_citations(state: AnalysisState, corpus: Corpus, chunk_ids: list[str]) -> CiteOutcome:
    """Register `chunk_ids` as the current answer's citations (see module docs)."""
    outcome = CiteOutcome()
    if len(chunk_ids) > MAX_CITED:
        raise CitationError(f"Cite at most {MAX_CITED} chunk ids per call ({len(chunk_ids)} given).")
    if not chunk_ids:
        state.citations.clear()
        outcome.no_evidence = True
        return outcome
    cleaned: list[tuple[str, str]] = [(raw, clean_id(raw)) for raw in chunk_ids]
    known = seen_ids(state)
    # Exact ids (seen or not) are looked up in the store: this also enforces the filter.
    wanted = {c for _, c in cleaned if c}
    found = {chunk.id: (chunk, meta) for chunk, meta in await corpus.chunks(wanted)}
    unresolved = [(raw, c) for raw, c in cleaned if c not in found]
    repairs: dict[str, str] = {}
    for raw, candidate in unresolved:
        if not candidate:
            continue
        fixed = _repair(candidate, known)
        if fixed is not None:
            repairs[raw] = fixed
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
        citation = from_search.get(target) or Citation.from_chunk(chunk, meta)
        state.citation_index[target] = citation
        if target not in state.citations:
            state.citations.append(target)
            outcome.citations.append(citation)
        elif citation not in outcome.citations:
            outcome.citations.append(citation)
    if not outcome.citations:
        shown = ", ".join(repr(r) for r in chunk_ids[:10])
        raise CitationError(
            f"None of the chunk ids could be resolved ({shown}). Cite chunk_id values exactly as returned "
            "by search (or from chunk_ids in items.jsonl / toc.json), or call cite([]) if the answer "
            "is not based on the knowledge base."
        )
    return outcome
