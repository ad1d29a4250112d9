"""Context expansion: grow each hit with neighbouring items of its section.

The whole enclosing section is used when it fits in ``max_chars``; otherwise the hit
grows outward (one item before, one after, alternately) without leaving its
section. Page headers/footers are left out. All items needed are fetched in one query, which
reads only each hit's window of its document.

Two ways to keep results of one document from repeating each other:

- merged (the default): hits whose grown ranges overlap or touch become one result
  (best score, best chunk id);
- `separate`: only hits whose chunks overlap or touch become one result; the others stay
  results of their own, and each grows (best first) only over items no other result holds.
  A long section without headings (a licence, a plain-text manual) then gives each
  well-ranked chunk its own result, instead of one passage where a single excerpt must
  choose among them.

Every hit whose chunk lies inside a result's passage (merged hits, and the `evidence`
candidates that did not make the cut) becomes one of its anchors: where in the passage it is,
with its score, so the excerpt can be placed on the best-scoring part (excerpt.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mcp_analysis.search.hybrid import Hit
from mcp_analysis.search.models import SearchResult
from mcp_analysis.store.database import Store
from mcp_analysis.store.models import DocumentMeta
from mcp_analysis.structure import HEADING_LABELS, SKIPPED_LABELS, render_item

WINDOW = 40  # items fetched on each side of a hit; bounds work on huge sections
_SKIP = SKIPPED_LABELS
_Key = tuple[str, int]  # (document id, item position)


@dataclass(eq=False)
class _Span:
    hit: Hit
    meta: DocumentMeta
    lo: int
    hi: int


class _Items:
    """The fetched items of the hits' neighbourhoods, by (document id, position)."""

    def __init__(self, rows: list[dict]) -> None:
        self.by_pos: dict[_Key, dict] = {(r["document_id"], int(r["position"])): r for r in rows}

    def size(self, doc_id: str, pos: int) -> int:
        row = self.by_pos.get((doc_id, pos))
        if row is None or row["label"] in _SKIP:
            return 0
        return len(row["text"] or "") + 2

    def body(self, span: _Span) -> list[dict]:
        keys = ((span.meta.id, p) for p in range(span.lo, span.hi + 1))
        return [row for key in keys if (row := self.by_pos.get(key)) is not None and row["label"] not in _SKIP]


async def expand_hits(
    store: Store,
    hits: Sequence[Hit],
    meta_of: Callable[[str], DocumentMeta | None],
    max_chars: int,
    limit: int,
    evidence: Sequence[Hit] = (),
    *,
    separate: bool = False,
) -> list[SearchResult]:
    """Turn ranked hits into expanded search results (at most `limit`), merged or `separate`.

    `evidence`: further scored candidates, used only as anchors of the passages they fall in."""
    visible = [(h, m) for h in hits if (m := meta_of(h.chunk.document_id)) is not None]
    if not visible:
        return []
    if max_chars <= 0:
        return [_plain(h, m, rank) for rank, (h, m) in enumerate(visible[:limit], start=1)]
    scored = [*(h for h, _ in visible), *evidence]
    visible = _leading_documents(visible, limit)
    items = await _fetch(store, [h for h, _ in visible])
    spans = _separate(visible, items, max_chars) if separate else _merge(visible, items, max_chars)
    return [_result(span, items, rank, scored if evidence else []) for rank, span in enumerate(spans[:limit], start=1)]


def _leading_documents(visible: list[tuple[Hit, DocumentMeta]], limit: int) -> list[tuple[Hit, DocumentMeta]]:
    """The hits of the first `limit` documents in hit order: the only ones the first `limit` results
    can hold. Each document makes at least one result (merged or not), results come in the order of
    their first hit, and hits of different documents never join, so a document first hit after
    `limit` others makes only later results and cannot change theirs; its window is not read."""
    leading: set[str] = set()
    for hit, _ in visible:
        if len(leading) == limit:
            break
        leading.add(hit.chunk.document_id)
    return [(h, m) for h, m in visible if h.chunk.document_id in leading]


async def _fetch(store: Store, hits: list[Hit]) -> _Items:
    """The items of each hit's window (its section, at most WINDOW items on each side), in one read."""
    windows: dict[str, list[tuple[int, int]]] = {}
    for hit in hits:
        a, b = hit.chunk.item_range
        s, e = hit.chunk.section_range
        windows.setdefault(hit.chunk.document_id, []).append((max(s, a - WINDOW), min(e, b + WINDOW)))
    columns = ["document_id", "position", "self_ref", "label", "text", "page_numbers", "heading_level"]
    return _Items(await store.item_windows(windows, columns))


def _grow(span: _Span, items: _Items, max_chars: int, free: Callable[[int], bool]) -> None:
    """Grow `span` to its whole section if that fits and is `free`, else outward over free items."""
    doc_id = span.meta.id
    s, e = span.hit.chunk.section_range
    a, b = span.hit.chunk.item_range
    lo_w, hi_w = max(s, a - WINDOW), min(e, b + WINDOW)
    section_fetched = lo_w == s and hi_w == e
    if (
        section_fetched
        and all(free(p) for p in range(s, e + 1) if not span.lo <= p <= span.hi)
        and sum(items.size(doc_id, p) for p in range(s, e + 1)) <= max_chars
    ):
        span.lo, span.hi = min(s, span.lo), max(e, span.hi)
        return
    total = sum(items.size(doc_id, p) for p in range(span.lo, span.hi + 1))
    grow_before, grow_after = True, True
    while grow_before or grow_after:
        if grow_before:
            before = span.lo - 1
            if before >= lo_w and free(before) and total + items.size(doc_id, before) <= max_chars:
                span.lo = before
                total += items.size(doc_id, before)
            else:
                grow_before = False
        if grow_after:
            after = span.hi + 1
            if after <= hi_w and free(after) and total + items.size(doc_id, after) <= max_chars:
                span.hi = after
                total += items.size(doc_id, after)
            else:
                grow_after = False


def _merge(visible: list[tuple[Hit, DocumentMeta]], items: _Items, max_chars: int) -> list[_Span]:
    """Each hit grown on its own; spans of one document that overlap or touch merged (best first)."""
    merged: list[_Span] = []
    for hit, meta in visible:  # hits arrive best-first; a merged result keeps the best rank
        span = _Span(hit, meta, *hit.chunk.item_range)
        _grow(span, items, max_chars, lambda _: True)
        touching = [
            o
            for o in merged
            if o.meta.id == meta.id
            and span.lo <= o.hi + 1
            and o.lo <= span.hi + 1
            and not (_table_rows(hit) or _table_rows(o.hit))
        ]
        if not touching:
            merged.append(span)
            continue
        keeper = touching[0]
        for other in [span, *touching[1:]]:
            keeper.lo, keeper.hi = min(keeper.lo, other.lo), max(keeper.hi, other.hi)
        merged = [m for m in merged if m is keeper or m not in touching]
    return merged


def _separate(visible: list[tuple[Hit, DocumentMeta]], items: _Items, max_chars: int) -> list[_Span]:
    """Hits whose chunks overlap or touch share a span; spans then grow, best first, over unheld items."""
    spans: list[_Span] = []
    owner: dict[_Key, _Span] = {}
    for hit, meta in visible:
        a, b = hit.chunk.item_range
        held = {owner.get((meta.id, p)) for p in range(a, b + 1)}
        near = [] if _table_rows(hit) else [s for s in spans if s in held and not _table_rows(s.hit)]
        keeper = near[0] if near else _Span(hit, meta, a, b)
        if not near:
            spans.append(keeper)
        for other in near[1:]:  # a chunk bridging two spans joins them
            keeper.lo, keeper.hi = min(keeper.lo, other.lo), max(keeper.hi, other.hi)
            spans.remove(other)
        keeper.lo, keeper.hi = min(keeper.lo, a), max(keeper.hi, b)
        for p in range(keeper.lo, keeper.hi + 1):
            owner[(meta.id, p)] = keeper
    for span in spans:
        _grow(span, items, max_chars, lambda p, span=span: owner.get((span.meta.id, p), span) is span)
        for p in range(span.lo, span.hi + 1):
            owner[(span.meta.id, p)] = span
    return spans


def _result(span: _Span, items: _Items, rank: int, scored: Sequence[Hit]) -> SearchResult:
    body = items.body(span)
    end = span.hit.chunk.item_range[1]
    while len(body) > 1 and body[-1]["label"] in HEADING_LABELS and int(body[-1]["position"]) > end:
        body.pop()  # grown into the next section's title, not its text (too big to follow): it titles nothing here
    content, offsets = _render(body)
    if _table_rows(span.hit):
        content, offsets = _with_rows(content, offsets, span.hit)
    anchor = _locate(content, offsets, span.hit)
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
    if anchor is not None and scored:
        inside = [h for h in scored if h is not span.hit and _within(h, span)]
        located = [(where, h.score) for h in inside if (where := _locate(content, offsets, h)) is not None]
        result.anchors = [(*anchor, span.hit.score), *((lo, hi, score) for (lo, hi), score in located)]
    return result


def _table_rows(hit: Hit) -> bool:
    """A chunk of a table's rows is its own passage: two such chunks hold different rows, so
    merging them into one result would show only the better-ranked one's rows."""
    first, last = hit.chunk.item_range
    return first == last and hit.chunk.labels == ["table"]


def _with_rows(content: str, offsets: dict[int, tuple[int, int]], hit: Hit) -> tuple[str, dict[int, tuple[int, int]]]:
    """The rows of a table chunk stand in for its item when the item's rendering lacks them
    (a big table's item shows it in part): the passage then shows the rows that matched."""
    position = hit.chunk.item_range[0]
    where = offsets.get(position)
    if where is None or content.find(hit.chunk.content[:60], *where) >= 0:
        return content, offsets
    lo, hi = where
    delta = len(hit.chunk.content) - (hi - lo)
    shifted = {p: (a + delta, b + delta) if a >= hi else (a, b) for p, (a, b) in offsets.items()}
    shifted[position] = (lo, lo + len(hit.chunk.content))
    return content[:lo] + hit.chunk.content + content[hi:], shifted


def _within(hit: Hit, span: _Span) -> bool:
    first, last = hit.chunk.item_range
    return hit.chunk.document_id == span.meta.id and span.lo <= first and last <= span.hi


def _render(body: list[dict]) -> tuple[str, dict[int, tuple[int, int]]]:
    """The passage as markdown, and where each item (by position) lies in it."""
    pieces: list[str] = []
    offsets: dict[int, tuple[int, int]] = {}
    offset = 0
    for row in body:
        piece = render_item(row["label"], row["text"], row["heading_level"])
        offset += 2 if pieces else 0
        offsets[int(row["position"])] = (offset, offset + len(piece))
        pieces.append(piece)
        offset += len(piece)
    return "\n\n".join(pieces), offsets


def _locate(content: str, offsets: dict[int, tuple[int, int]], hit: Hit) -> tuple[int, int] | None:
    """Where the hit's own chunk lies in the passage (its anchor)."""
    first, last = hit.chunk.item_range
    spans = [where for position, where in offsets.items() if first <= position <= last]
    if not spans:
        return None
    lo, hi = min(a for a, _ in spans), max(b for _, b in spans)
    if first == last:  # one long item split into several chunks: narrow to this chunk's piece
        at = content.find(hit.chunk.content[:60], lo, hi)
        if at >= 0:
            lo, hi = at, min(hi, at + len(hit.chunk.content))
    return lo, hi


# What a hit takes from its chunk under the same name (the rest is the document's, or its rank).
_FROM_CHUNK = {"content", "page_numbers", "headings", "doc_item_refs", "labels", "picture_refs"}


def _plain(hit: Hit, meta: DocumentMeta, rank: int) -> SearchResult:
    return SearchResult(
        chunk_id=hit.chunk.id,
        document_id=meta.id,
        document_title=meta.title,
        document_uri=meta.uri,
        score=round(hit.score, 6),
        rank=rank,
        **hit.chunk.model_dump(include=_FROM_CHUNK),
    )
