"""Context expansion: grow each hit with neighbouring items of its section.

The whole enclosing section is used when it fits in ``max_chars``; otherwise the hit
grows outward (one item before, one after, alternately) without leaving its
section. Page headers/footers are left out. Hits of one document whose ranges
overlap or touch are merged into one result (best score, best chunk id). All items
needed are fetched in one query.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mcp_analysis.search.hybrid import Hit
from mcp_analysis.search.models import SearchResult
from mcp_analysis.store.database import Store
from mcp_analysis.store.filters import sql_in
from mcp_analysis.store.models import DocumentMeta
from mcp_analysis.structure import SKIPPED_LABELS, render_item

WINDOW = 40  # items fetched on each side of a hit; bounds work on huge sections
_SKIP = SKIPPED_LABELS


@dataclass
class _Span:
    hit: Hit
    meta: DocumentMeta
    lo: int
    hi: int


async def expand_hits(
    store: Store,
    hits: Sequence[Hit],
    meta_of: Callable[[str], DocumentMeta | None],
    max_chars: int,
    limit: int,
) -> list[SearchResult]:
    """Turn ranked hits into merged, expanded search results (at most `limit`)."""
    visible = [(h, m) for h in hits if (m := meta_of(h.chunk.document_id)) is not None]
    if not visible:
        return []
    if max_chars <= 0:
        return [_plain(h, m, rank) for rank, (h, m) in enumerate(visible[:limit], start=1)]

    windows: dict[str, list[tuple[int, int]]] = {}
    for hit, _ in visible:
        a, b = hit.chunk.item_range
        s, e = hit.chunk.section_range
        windows.setdefault(hit.chunk.document_id, []).append((max(s, a - WINDOW), min(e, b + WINDOW)))
    # One indexed query (document_id IN ...) bounded by the overall position range is much
    # faster than OR-ing per-document ranges; rows outside a hit's window are ignored below.
    low = min(lo for ranges in windows.values() for lo, _ in ranges)
    high = max(hi for ranges in windows.values() for _, hi in ranges)
    rows = await store.items(
        f"{sql_in('document_id', windows)} AND position >= {low} AND position <= {high}",
        ["document_id", "position", "self_ref", "label", "text", "page_numbers", "heading_level"],
    )
    by_pos: dict[tuple[str, int], dict] = {(r["document_id"], int(r["position"])): r for r in rows}

    def size(doc_id: str, pos: int) -> int:
        row = by_pos.get((doc_id, pos))
        if row is None or row["label"] in _SKIP:
            return 0
        return len(row["text"] or "") + 2

    spans: list[_Span] = []
    for hit, meta in visible:
        doc_id = hit.chunk.document_id
        a, b = hit.chunk.item_range
        s, e = hit.chunk.section_range
        lo_w, hi_w = max(s, a - WINDOW), min(e, b + WINDOW)
        section_fetched = lo_w == s and hi_w == e
        if section_fetched and sum(size(doc_id, p) for p in range(s, e + 1)) <= max_chars:
            lo, hi = s, e
        else:
            lo, hi = a, b
            total = sum(size(doc_id, p) for p in range(a, b + 1))
            grow_before, grow_after = True, True
            while grow_before or grow_after:
                if grow_before:
                    if lo - 1 >= lo_w and total + size(doc_id, lo - 1) <= max_chars:
                        lo -= 1
                        total += size(doc_id, lo)
                    else:
                        grow_before = False
                if grow_after:
                    if hi + 1 <= hi_w and total + size(doc_id, hi + 1) <= max_chars:
                        hi += 1
                        total += size(doc_id, hi)
                    else:
                        grow_after = False
        spans.append(_Span(hit, meta, lo, hi))

    merged: list[_Span] = []
    for span in spans:  # spans arrive best-first; a merged result keeps the best rank
        touching = [
            other
            for other in merged
            if other.meta.id == span.meta.id
            and span.lo <= other.hi + 1
            and other.lo <= span.hi + 1
            and not (_table_rows(span.hit) or _table_rows(other.hit))
        ]
        if not touching:
            merged.append(span)
            continue
        keeper = touching[0]
        for other in [span, *touching[1:]]:
            keeper.lo, keeper.hi = min(keeper.lo, other.lo), max(keeper.hi, other.hi)
        merged = [m for m in merged if m is keeper or m not in touching]

    results = []
    for rank, span in enumerate(merged[:limit], start=1):
        items = [by_pos[(span.meta.id, p)] for p in range(span.lo, span.hi + 1) if (span.meta.id, p) in by_pos]
        body = [r for r in items if r["label"] not in _SKIP]
        content, anchor = _render(body, span.hit)
        plain = _plain(span.hit, span.meta, rank)
        result = plain.model_copy(
            update={
                "content": content or plain.content,
                "page_numbers": sorted({p for r in body for p in (r["page_numbers"] or [])}) or plain.page_numbers,
                "doc_item_refs": [r["self_ref"] for r in body] or plain.doc_item_refs,
                "labels": list(dict.fromkeys(r["label"] for r in body)) or plain.labels,
                "picture_refs": [r["self_ref"] for r in body if r["label"] == "picture"],
            }
        )
        result.anchor = anchor
        results.append(result)
    return results


def _table_rows(hit: Hit) -> bool:
    """A chunk of a table's rows is its own passage: two such chunks hold different rows, so
    merging them into one result would show only the better-ranked one's rows."""
    first, last = hit.chunk.item_range
    return first == last and hit.chunk.labels == ["table"]


def _render(body: list[dict], hit: Hit) -> tuple[str, tuple[int, int] | None]:
    """The passage as markdown, and where the hit's own chunk lies in it (its anchor)."""
    first, last = hit.chunk.item_range
    pieces: list[str] = []
    offset = 0
    lo: int | None = None
    hi = 0
    for row in body:
        piece = render_item(row["label"], row["text"], row["heading_level"])
        offset += 2 if pieces else 0
        if first <= int(row["position"]) <= last:
            lo = offset if lo is None else lo
            hi = offset + len(piece)
        pieces.append(piece)
        offset += len(piece)
    content = "\n\n".join(pieces)
    if lo is None:
        return content, None
    if first == last:  # one long item split into several chunks: narrow to this chunk's piece
        at = content.find(hit.chunk.content[:60], lo, hi)
        if at >= 0:
            lo, hi = at, min(hi, at + len(hit.chunk.content))
        else:  # rows of a table its item shows in part or as markdown: the chunk itself is the passage
            content = content[:lo] + hit.chunk.content + content[hi:]
            hi = lo + len(hit.chunk.content)
    return content, (lo, hi)


def _plain(hit: Hit, meta: DocumentMeta, rank: int) -> SearchResult:
    chunk = hit.chunk
    return SearchResult(
        chunk_id=chunk.id,
        content=chunk.content,
        document_id=meta.id,
        document_title=meta.title,
        document_uri=meta.uri,
        score=round(hit.score, 6),
        rank=rank,
        page_numbers=chunk.page_numbers,
        headings=chunk.headings,
        doc_item_refs=chunk.doc_item_refs,
        labels=chunk.labels,
        picture_refs=chunk.picture_refs,
    )
