"""A chunk that is only a heading is never a search candidate on its own: it joins its section.

A heading (a title over a table of its own, a heading over a sub-heading, a name over an address)
joins the chunk that follows it in the section it titles, which takes the better of both chunks'
scores and ranks; that chunk's heading path names the section. Knowledge bases ingested before the
chunker joined such headings, and other applications' databases, are read this way.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from mcp_analysis.store import schema
from mcp_analysis.store.candidate import Candidate
from mcp_analysis.store.cosines import rows_and_cosines
from mcp_analysis.store.filters import sql_quote
from mcp_analysis.store.item_offsets import StoreItemOffsets
from mcp_analysis.structure import HEADING_LABELS

CHUNK_COLUMNS = ("id", "document_id", "content", "metadata", "order")
_FOLLOWERS = 3  # chunks looked at after a bare heading (a heading over sub-headings over text)
_WORD = re.compile(r"\w+")
_LONGEST_BARE = 600  # characters: a longer chunk is never only headings and a few words (skips parsing it)


def is_bare_heading(row: dict[str, Any], max_words: int) -> bool:
    """A chunk that is a heading (or headings) plus at most `max_words` words of its own."""
    if len(str(row.get("content") or "")) > _LONGEST_BARE:
        return False
    meta = metadata_of(row)
    labels = set(meta.get("labels") or [])
    if labels and labels <= HEADING_LABELS:
        return True
    if not labels & HEADING_LABELS and not str(row.get("content") or "").lstrip().startswith("#"):
        return False
    headings = {h.strip() for h in meta.get("headings") or []}
    rest = [
        line
        for line in str(row.get("content") or "").splitlines()
        if line.strip() and not line.lstrip().startswith("#") and line.strip() not in headings
    ]
    return len(_WORD.findall(" ".join(rest))) <= max_words


def metadata_of(row: dict[str, Any]) -> dict[str, Any]:
    try:
        meta = json.loads(row.get("metadata") or "{}")
    except (TypeError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


class StoreBareHeadings(StoreItemOffsets):
    """The store's side: bare headings among a search's candidates joined to their sections."""

    async def _join_bare_headings(
        self, listed: list[Candidate], unit: np.ndarray | None, max_words: int
    ) -> list[Candidate]:
        """Each bare heading joins the first chunk after it in its section (see module docs)."""
        bare = {c.key for c in listed if is_bare_heading(c.row, max_words)}
        if not bare:
            return listed
        followers = await self._followers([c for c in listed if c.key in bare], unit)
        by_id = {c.key: c for c in listed if c.key not in bare}
        out: list[Candidate] = []
        for candidate in listed:
            joined = by_id.get(candidate.key)
            if candidate.key in bare:
                follower = _follower(candidate, followers, max_words)
                if follower is None:
                    continue  # a heading over nothing (an empty section, the end of its document)
                joined = by_id.setdefault(follower.key, follower)
                _absorb(joined, candidate)
            # A follower found only through its heading takes the heading's place in the order.
            if joined is not None and all(c is not joined for c in out):
                out.append(joined)
        return out

    async def _followers(self, bare: Sequence[Candidate], unit: np.ndarray | None) -> dict[tuple[str, int], Candidate]:
        """(document id, order) -> the chunks just after each bare heading, in one query (of the
        headings' own documents, which passed the prefilter)."""
        spans = " OR ".join(
            f"(document_id = {sql_quote(str(c.row['document_id']))} AND `order` > {int(c.row['order'] or 0)} "
            f"AND `order` <= {int(c.row['order'] or 0) + _FOLLOWERS})"
            for c in bare
        )
        query = self.tables[schema.CHUNKS].query().where(spans)
        table = await query.select([*CHUNK_COLUMNS, *(["vector"] if unit is not None else [])]).to_arrow()
        rows, cosines = rows_and_cosines(table, unit)
        rows = await self.complete_chunks(rows)
        return {
            (str(row["document_id"]), int(row["order"] or 0)): Candidate(row, cosine, None)
            for row, cosine in zip(rows, cosines, strict=True)
        }


def _follower(heading: Candidate, followers: dict[tuple[str, int], Candidate], max_words: int) -> Candidate | None:
    """The first chunk after `heading` that is not a bare heading itself, if inside its section."""
    doc_id, order = str(heading.row["document_id"]), int(heading.row["order"] or 0)
    section_end = (metadata_of(heading.row).get("section_range") or [0, 0])[1]
    for step in range(1, _FOLLOWERS + 1):
        follower = followers.get((doc_id, order + step))
        if follower is None:
            return None
        start = (metadata_of(follower.row).get("item_range") or [0, 0])[0]
        if section_end and start > section_end:
            return None  # an empty section: the heading titles nothing
        if not is_bare_heading(follower.row, max_words):
            return follower
    return None


def _absorb(into: Candidate, heading: Candidate) -> None:
    """`into` takes the better of both candidates' scores and ranks."""
    into.cosine = _best(into.cosine, heading.cosine, max)
    into.keyword = _best(into.keyword, heading.keyword, max)
    into.vector_rank = _best(into.vector_rank, heading.vector_rank, min)
    into.keyword_rank = _best(into.keyword_rank, heading.keyword_rank, min)


def _best(a: Any, b: Any, pick: Any) -> Any:
    values = [v for v in (a, b) if v is not None]
    return pick(values) if values else None
