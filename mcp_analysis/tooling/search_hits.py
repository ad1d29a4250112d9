"""The `search` result: hits with passages, shortened (then fewer hits) to fit the budget."""

from __future__ import annotations

from pydantic import BaseModel, Field

from mcp_analysis.search.models import SearchHit, SearchResult
from mcp_analysis.text import label
from mcp_analysis.tooling.fitting import largest_fit, page_span, size

MIN_CONTEXT = 160  # the smallest passage a hit is cut to before hits are dropped


class SearchOutput(BaseModel):
    session: str = Field(description="Analysis session handle.")
    query: str
    context: int = Field(description="Characters shown per hit's passage, on average.")
    results: list[SearchHit]
    omitted: int = Field(0, description="Hits left out to fit the result budget.")


def render_search(out: SearchOutput, max_context: int, content_resource: str | None = None) -> str:
    """One block per hit; says how to see more when passages or hits were cut.

    `content_resource` is the front door's name for a document's whole text, with
    ``{document_id}`` in it (the sandbox path is named either way).
    """
    if not out.results and not out.omitted:
        return f'No results for "{out.query}".'
    if not out.results:
        return (
            f'{out.omitted} hits for "{out.query}", none of which fits the result budget (server.max_result_chars): '
            "ask for fewer hits (limit) or shorter passages (context), or search() in execute_code."
        )
    lines = [f'{len(out.results)} hits for "{out.query}". Cite with the chunk_id.']
    for hit in out.results:
        where = " › ".join([hit.document_title, *hit.headings])
        lines.append(f"\n[{hit.rank}] {where}{page_span(hit.page_numbers)}")
        shown = f"{len(hit.content):,}/{hit.full_chars:,} chars" if hit.full_chars > len(hit.content) else "whole"
        lines.append(f"chunk_id {hit.chunk_id} · document {hit.document_id} · {shown}")
        lines.append(hit.content)
    if out.omitted:
        lines.append(f"\n({out.omitted} more hits left out to fit the result budget: ask a smaller limit or context.)")
    if any(h.full_chars > len(h.content) for h in out.results):
        wider = min(max_context, 4 * out.context) if max_context > out.context else 4 * out.context
        bound = f" (up to {max_context})" if max_context > out.context else ""
        resource = f" (resource {content_resource})" if content_resource else ""
        lines.append(
            f"\nMore: search again with context={wider}{bound} for more of each passage; a whole document is "
            f"/documents/{{document_id}}/content.txt in execute_code{resource}."
        )
    return "\n".join(lines)


def search_result(
    session: str,
    query: str,
    results: list[SearchResult],
    context: int,
    max_context: int,
    note: str,
    budget: int,
    content_resource: str | None = None,
) -> tuple[SearchOutput, str]:
    """Hits with passages of `context` characters; shorter passages, then fewer hits, to fit the budget."""

    def build(k: int, chars: int) -> tuple[SearchOutput, str]:
        model = SearchOutput(
            session=session,
            query=label(query),
            context=chars,
            results=SearchHit.all_of(results[:k], query, chars),
            omitted=len(results) - k,
        )
        return model, render_search(model, max_context, content_resource) + note

    chars, floor = context, min(context, MIN_CONTEXT)
    while True:
        model, text = build(len(results), chars)
        if size(model, text) <= budget:
            return model, text
        if chars <= floor:
            return largest_fit(lambda k: build(k, floor), len(results), budget)
        chars = max(floor, int(chars * 0.7))
