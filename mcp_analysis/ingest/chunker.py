"""Items -> chunks of about `max_tokens` embedder tokens.

Chunks never cross a section boundary and never split an item, except an item that
alone exceeds the budget (a long paragraph or table), which is split at sentence or
line boundaries. A heading is never a chunk of its own: it joins the chunk that
follows it (a heading over a sub-heading, one over a paragraph a little over the budget),
and before a table split into row groups or an item split in pieces it lives on as their
heading path (which the full-text index and the embedder see). Each chunk records the
headings above it, the ``self_ref`` of every item in it (``doc_item_refs``), labels and
pages, and the item positions of itself and of its enclosing section so that search can
expand a hit cheaply.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from mcp_analysis.ingest.items import ItemDraft
from mcp_analysis.ingest.tables import MAX_TABLE_CHUNKS, ExtractedTable, row_groups
from mcp_analysis.structure import HEADING_LABELS, SKIPPED_LABELS, section_ranges

TokenCounter = Callable[[Sequence[str]], list[int]]

# The tokenizer encodes a whole text before it truncates (about 50 bytes of memory per token),
# so no text handed to it is longer than this: the embedder reads its first 256 tokens only, and
# the chunker's counts (prepare.token_counter) count a longer text by its start.
TOKENIZED_CHARS = 20_000


@dataclass
class ChunkDraft:
    order: int
    content: str
    headings: list[str]
    doc_item_refs: list[str]
    labels: list[str]
    page_numbers: list[int]
    picture_refs: list[str]
    item_range: tuple[int, int]
    section_range: tuple[int, int]
    item_positions: list[int] = field(default_factory=list)
    lead: str | None = None  # what the embedder is given of a table's row group (see tables.RowGroup)

    @property
    def fts_text(self) -> str:
        """What the full-text index sees: headings give the chunk context."""
        return self._with_headings(self.content)

    @property
    def embedding_text(self) -> str:
        """What the embedder sees: the full-text index's text, or, for a group of a table's
        rows, its lead (a bounded number of tokens, whatever the group's size)."""
        text = self._with_headings(self.lead) if self.lead is not None else self.fts_text
        return text[:TOKENIZED_CHARS]

    def _with_headings(self, text: str) -> str:
        head = "\n".join(h for h in self.headings if h and not text.startswith(h))
        return f"{head}\n{text}" if head else text

    def metadata(self) -> dict[str, object]:
        return {
            "headings": self.headings,
            "doc_item_refs": self.doc_item_refs,
            "labels": self.labels,
            "page_numbers": self.page_numbers,
            "picture_refs": self.picture_refs,
            "item_range": list(self.item_range),
            "section_range": list(self.section_range),
        }


def _split_long(text: str, counts: TokenCounter, max_tokens: int, level: int = 0) -> list[str]:
    """Split one oversized text at line (level 0), sentence (1), then word (2) boundaries."""
    if level >= 2:
        longest = max_tokens * 8  # a "word" longer than this (a base64 blob, a 50 MB cell) is cut in pieces
        words = [w[i : i + longest] for w in text.split() for i in range(0, len(w), longest)]
        step = max(1, max_tokens // 3)  # a word is at least one token; leave room for long words
        return [" ".join(words[i : i + step]) for i in range(0, len(words), step)]
    joiner = "\n" if level == 0 else " "
    parts = text.splitlines() if level == 0 else re.split(r"(?<=[.!?])\s+", text)
    parts = [p for p in parts if p.strip()]
    if len(parts) <= 1:
        return _split_long(text, counts, max_tokens, level + 1)
    out: list[str] = []
    current: list[str] = []
    used = 0
    for part, size in zip(parts, counts(parts), strict=True):
        if size > max_tokens:
            if current:
                out.append(joiner.join(current))
                current, used = [], 0
            out.extend(_split_long(part, counts, max_tokens, level + 1))
            continue
        if current and used + size > max_tokens:
            out.append(joiner.join(current))
            current, used = [], 0
        current.append(part)
        used += size
    if current:
        out.append(joiner.join(current))
    return [p.strip() for p in out if p.strip()]


def chunk_items(
    items: Sequence[ItemDraft],
    count_tokens: TokenCounter,
    max_tokens: int = 256,
    tables: Mapping[str, ExtractedTable] | None = None,
    max_table_chunks: int = MAX_TABLE_CHUNKS,
) -> list[ChunkDraft]:
    """Group items into chunks (see module docs). Noise items (page headers...) are left out.

    A table (`tables`, by self_ref) too big for one chunk, or shown in part by its item,
    becomes groups of its rows, each with the header row first (tables.row_groups)."""
    if not items:
        return []
    sections = section_ranges([it.label for it in items], [it.heading_level for it in items])
    sizes = count_tokens([it.text for it in items])
    chunks: list[ChunkDraft] = []
    heading_stack: list[tuple[int, str]] = []
    current: list[int] = []
    used = 0

    def headings_now() -> list[str]:
        return [text for _, text in heading_stack]

    def emit(positions: list[int], text: str | None = None, lead: str | None = None) -> None:
        if not positions:
            return
        chosen = [items[p] for p in positions]
        content = text if text is not None else "\n\n".join(it.text for it in chosen)
        refs = list(dict.fromkeys(it.self_ref for it in chosen))
        chunks.append(
            ChunkDraft(
                order=len(chunks),
                content=content,
                headings=headings_now(),
                doc_item_refs=refs,
                labels=list(dict.fromkeys(it.label for it in chosen)),
                page_numbers=sorted({p for it in chosen for p in it.page_numbers}),
                picture_refs=[it.self_ref for it in chosen if it.label == "picture"],
                item_range=(positions[0], positions[-1]),
                section_range=(min(sections[p][0] for p in positions), max(sections[p][1] for p in positions)),
                item_positions=list(positions),
                lead=lead,
            )
        )

    def headings_only() -> bool:
        return all(items[p].label in HEADING_LABELS for p in current)

    for i, item in enumerate(items):
        if item.label in SKIPPED_LABELS:
            continue
        if item.label in HEADING_LABELS and not headings_only():
            emit(current)
            current, used = [], 0
        if item.label in HEADING_LABELS:
            level = item.heading_level if item.heading_level is not None else 1
            while heading_stack and heading_stack[-1][0] >= level:
                heading_stack.pop()
            heading_stack.append((level, item.text))
        size = sizes[i]
        table = (tables or {}).get(item.self_ref)
        if table is not None and (size > max_tokens or table.partial_in_document):
            if not headings_only():  # headings over the rows are the row groups' heading path
                emit(current)
            current, used = [], 0
            for group in row_groups(table, count_tokens, max_tokens, max_table_chunks):
                emit([i], group.text, group.lead)
            continue
        if size > max_tokens and item.label not in HEADING_LABELS:
            if not headings_only():  # headings over the pieces are their heading path
                emit(current)
            current, used = [], 0
            for piece in _split_long(item.text, count_tokens, max_tokens):
                emit([i], piece)
            continue
        if current and used + size > max_tokens and not headings_only():
            emit(current)
            current, used = [], 0
        while current and used + size > max_tokens:  # headings alone past the budget: the earliest go
            used -= sizes[current.pop(0)]  # (those still open stay in the heading path)
        current.append(i)
        used += size
    if not (headings_only() and chunks):  # a heading at the end titles nothing
        emit(current)
    return chunks
