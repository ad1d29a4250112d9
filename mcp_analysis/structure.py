"""Document structure facts shared by ingest, search and the sandbox (kept import-light).

Labels follow docling's ``DocItemLabel`` values.
"""

from __future__ import annotations

from collections.abc import Sequence

NOISE_LABELS = frozenset({"page_header", "page_footer", "footnote"})
"""Labels left out of chunks and expanded search context (footnotes stay in chunks)."""
SKIPPED_LABELS = NOISE_LABELS - {"footnote"}
HEADING_LABELS = frozenset({"title", "section_header"})


def render_item(label: str, text: str, heading_level: int | None) -> str:
    """One item as markdown: the form content.txt and expanded search hits use."""
    if label == "title":
        return f"# {text}"
    if label == "section_header":
        return "#" * min(6, (heading_level or 1) + 1) + f" {text}"
    if label == "list_item":
        return f"- {text}"
    if label == "code":
        return f"```\n{text}\n```"
    return text


def section_ranges(labels: Sequence[str], levels: Sequence[int | None]) -> list[tuple[int, int]]:
    """For each item position, the [start, end] positions of the smallest section containing it.

    A section starts at a heading and ends just before the next heading of the same or a
    higher level; items before the first heading form their own section.
    """
    n = len(labels)
    if n == 0:
        return []

    def level_of(i: int) -> int:
        return levels[i] if levels[i] is not None else 1  # type: ignore[return-value]

    starts = [0] * n
    stack: list[tuple[int, int]] = []
    ends: dict[int, int] = {}
    for i, label in enumerate(labels):
        if label in HEADING_LABELS:
            while stack and stack[-1][0] >= level_of(i):
                ends[stack.pop()[1]] = i - 1
            stack.append((level_of(i), i))
        starts[i] = stack[-1][1] if stack else 0
    for _, start in stack:
        ends[start] = n - 1
    first_heading = next((i for i, label in enumerate(labels) if label in HEADING_LABELS), n)
    return [
        (0, max(0, first_heading - 1)) if i < first_heading else (starts[i], ends.get(starts[i], n - 1))
        for i in range(n)
    ]
