"""Tool results: a structured model (the output schema) plus compact text for the model.

What each channel carries (README "Context budget"): the text and the structured content
hold the same facts, so a host that shows the model either one gives it a complete answer;
the text is a compact rendering (one line per item, no repeated key names), not a JSON copy.

Every result, text and structured content together, is kept within
``server.max_result_chars`` (measured as ``len(text) + len(json.dumps(structured,
ensure_ascii=False))``). What does not fit is left out with a note naming where the rest is:
a resource, a paging offset, or a larger/smaller argument.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel, Field

from mcp_analysis.sandbox.output import clip
from mcp_analysis.search.excerpt import label, shared_dir
from mcp_analysis.search.models import SearchHit, SearchResult
from mcp_analysis.session.state import Citation
from mcp_analysis.store.models import DocumentMeta

log = logging.getLogger(__name__)
M = TypeVar("M", bound=BaseModel)
MIN_CONTEXT = 160  # the smallest passage a hit is cut to before hits are dropped


def size(model: BaseModel, text: str) -> int:
    """What a result costs: its text plus its structured content as JSON."""
    return _cost(model.model_dump(mode="json"), text)


def _cost(structured: dict[str, Any], text: str) -> int:
    return len(text) + len(json.dumps(structured, ensure_ascii=False))


def result(model: BaseModel, text: str, budget: int) -> CallToolResult:
    structured = model.model_dump(mode="json")
    over = _cost(structured, text) - budget
    if over > 0:  # the fitters below prevent this; never send more than the budget anyway
        log.warning("tool result over budget by %d characters; cutting its text", over)
        text = text[: max(0, len(text) - over)]
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=structured)


def largest_fit(build: Callable[[int], tuple[M, str]], n: int, budget: int) -> tuple[M, str]:
    """build(k) for the largest k <= n whose result fits the budget (k = 0 must fit)."""
    model, text = build(n)
    if size(model, text) <= budget:
        return model, text
    lo, hi = 0, n - 1
    while lo < hi:  # the largest k in [lo, hi] that fits
        mid = (lo + hi + 1) // 2
        if size(*build(mid)) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return build(lo)


def session_note(session_id: str, must_pass: bool) -> str:
    if not must_pass:
        return ""
    return (
        f'\n\nsession: {session_id} — pass session="{session_id}" in your next calls to keep '
        "your variables, searches and citations."
    )


def _pages(pages: list[int]) -> str:
    if not pages:
        return ""
    if len(pages) > 1 and pages == list(range(pages[0], pages[-1] + 1)):
        return f" · p. {pages[0]}-{pages[-1]}"
    return " · p. " + ", ".join(map(str, pages))


# --------------------------------------------------------------------------- search


class SearchOutput(BaseModel):
    session: str = Field(description="Analysis session handle.")
    query: str
    context: int = Field(description="Characters shown of each hit's passage, at most.")
    results: list[SearchHit]
    omitted: int = Field(0, description="Hits left out to fit the result budget.")


def render_search(out: SearchOutput, max_context: int) -> str:
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
        lines.append(f"\n[{hit.rank}] {where}{_pages(hit.page_numbers)}")
        shown = f"{len(hit.content):,}/{hit.full_chars:,} chars" if hit.full_chars > len(hit.content) else "whole"
        lines.append(f"chunk_id {hit.chunk_id} · document {hit.document_id} · {shown}")
        lines.append(hit.content)
    if out.omitted:
        lines.append(f"\n({out.omitted} more hits left out to fit the result budget: ask a smaller limit or context.)")
    if any(h.full_chars > len(h.content) for h in out.results):
        wider = min(max_context, 4 * out.context) if max_context > out.context else 4 * out.context
        bound = f" (up to {max_context})" if max_context > out.context else ""
        lines.append(
            f"\nMore: search again with context={wider}{bound} for more of each passage; a whole document is "
            "/documents/{document_id}/content.txt in execute_code (resource documents:///{document_id}/content.txt)."
        )
    return "\n".join(lines)


def search_result(
    session: str, query: str, results: list[SearchResult], context: int, max_context: int, note: str, budget: int
) -> tuple[SearchOutput, str]:
    """Hits with passages of `context` characters; shorter passages, then fewer hits, to fit the budget."""

    def build(k: int, chars: int) -> tuple[SearchOutput, str]:
        model = SearchOutput(
            session=session,
            query=label(query),
            context=chars,
            results=[SearchHit.of(r, query, chars) for r in results[:k]],
            omitted=len(results) - k,
        )
        return model, render_search(model, max_context) + note

    chars, floor = context, min(context, MIN_CONTEXT)
    while True:
        model, text = build(len(results), chars)
        if size(model, text) <= budget:
            return model, text
        if chars <= floor:
            return largest_fit(lambda k: build(k, floor), len(results), budget)
        chars = max(floor, int(chars * 0.7))


# --------------------------------------------------------------------------- list_documents


DOCUMENT_LABEL_CHARS = 200  # of a listed title or uri (metadata.json has them whole)
METADATA_CHARS = 300  # of a listed document's metadata, as JSON


def shown_metadata(metadata: dict[str, Any], limit: int = METADATA_CHARS) -> dict[str, Any]:
    """`metadata` within about `limit` characters of JSON: long values cut, keys past the limit left out."""
    shown: dict[str, Any] = {}
    size = 0
    for key, value in metadata.items():
        rendered = json.dumps(value, ensure_ascii=False)
        if len(rendered) > DOCUMENT_LABEL_CHARS:
            value = label(value if isinstance(value, str) else rendered, DOCUMENT_LABEL_CHARS)
        cost = len(key) + min(len(rendered), DOCUMENT_LABEL_CHARS) + 6
        if shown and size + cost > limit:
            shown["…"] = f"{len(metadata) - len(shown)} more keys in metadata.json"
            break
        shown[label(key, 60)] = value
        size += cost
    return shown


class DocumentInfo(BaseModel):
    id: str
    title: str
    uri: str
    metadata: dict[str, Any] = Field(
        default_factory=dict, description="Your metadata (all of it, with format and file_name: metadata.json)."
    )

    @classmethod
    def of(cls, meta: DocumentMeta) -> DocumentInfo:
        return cls(
            id=meta.id,
            title=label(meta.title, DOCUMENT_LABEL_CHARS),
            uri=label(meta.uri, DOCUMENT_LABEL_CHARS),
            metadata=shown_metadata(meta.user_metadata()),
        )


class ListDocumentsOutput(BaseModel):
    session: str
    total: int = Field(description="Documents visible to this client.")
    offset: int
    documents: list[DocumentInfo]
    next_offset: int | None = Field(None, description="Pass as `offset` to get the next page; null at the end.")


def render_documents(out: ListDocumentsOutput) -> str:
    if not out.documents:
        return "No documents are visible." if out.total == 0 else f"No documents at offset {out.offset}."
    end = out.offset + len(out.documents)
    prefix = shared_dir([d.uri for d in out.documents]) if len(out.documents) > 2 else ""
    shown = f"uri after {prefix}" if prefix else "uri"
    lines = [f"Documents {out.offset + 1}-{end} of {out.total} (id | title | {shown}):"]
    for d in out.documents:
        meta = " | " + ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in d.metadata.items())
        lines.append(f"{d.id} | {d.title} | {d.uri[len(prefix) :]}{meta if d.metadata else ''}")
    if out.next_offset is not None:
        lines.append(f"More: list_documents(offset={out.next_offset}).")
    lines.append("Files: /documents/{id}/metadata.json, content.txt, items.jsonl, toc.json")
    return "\n".join(lines)


def documents_result(
    session: str, documents: list[DocumentInfo], total: int, offset: int, note: str, budget: int
) -> tuple[ListDocumentsOutput, str]:
    """A page of documents; a shorter page (with its next_offset) when the budget is reached.

    A page holds at least one document (unless its title and uri alone exceed the budget), so paging
    by next_offset moves on: when the first one does not fit with its metadata, it is listed without
    (metadata.json has all of it).
    """

    def build(k: int) -> tuple[ListDocumentsOutput, str]:
        end = offset + k
        model = ListDocumentsOutput(
            session=session,
            total=total,
            offset=offset,
            documents=documents[:k],
            next_offset=end if end < total else None,
        )
        return model, render_documents(model) + note

    model, text = largest_fit(build, len(documents), budget)
    if model.documents or not documents:
        return model, text
    first = documents[0]
    documents = [first.model_copy(update={"metadata": {}})]
    note = f"\n(Metadata of {first.id} left out to fit the result budget: /documents/{first.id}/metadata.json)" + note
    return largest_fit(build, 1, budget)  # the budget still wins over a title or uri longer than it


# --------------------------------------------------------------------------- execute_code


class ExecuteOutput(BaseModel):
    session: str
    execution: int = Field(description="Number of this execution in the session (see the state resource).")
    success: bool
    stdout: str = ""
    stderr: str = ""
    value: str | None = Field(None, description="repr() of the trailing expression.")
    error: str | None = None
    duration_ms: float = 0.0
    truncated: bool = False
    state_restored: bool = Field(False, description="The call was stopped; variables from before it are kept.")
    full_output: str | None = Field(None, description="Resource with the untruncated output, when cut here.")


def render_execution(out: ExecuteOutput) -> str:
    status = "ok" if out.success else "failed"
    parts = [f"execution {out.execution}: {status} in {out.duration_ms:.1f} ms"]
    if out.stdout:
        parts.append("stdout:\n" + out.stdout.rstrip("\n"))
    if out.stderr:
        parts.append("stderr:\n" + out.stderr.rstrip("\n"))
    if out.value is not None:
        parts.append("value: " + out.value)
    if out.error:
        parts.append("error:\n" + out.error)
    if out.full_output:
        parts.append(f"(output shortened; the whole output is in resource {out.full_output})")
    return "\n".join(parts)


_OUTPUT_FIELDS = ("stdout", "stderr", "value", "error")


def execution_result(out: ExecuteOutput, full_output_uri: str, note: str, budget: int) -> tuple[ExecuteOutput, str]:
    """The output, or each field's head and tail with a marker naming the resource that holds all of it."""
    text = render_execution(out) + note
    if size(out, text) <= budget:
        return out, text
    how = f"not shown here; the whole output is in resource {full_output_uri}"
    fields = {k: getattr(out, k) for k in _OUTPUT_FIELDS if getattr(out, k)}

    def build(room: int) -> tuple[ExecuteOutput, str]:
        share = _allot({k: len(v) for k, v in fields.items()}, room)
        model = out.model_copy(
            update={k: clip(v, share[k], how)[0] for k, v in fields.items()}
            | {"truncated": True, "full_output": full_output_uri}
        )
        return model, render_execution(model) + note

    room = (budget - size(*build(0))) // 2  # each character is paid twice: text and structured
    while True:
        model, text = build(max(0, room))
        excess = size(model, text) - budget
        if excess <= 0 or room <= 0:
            return model, text
        room -= max(excess // 2 + 1, room // 10)


def _allot(lengths: dict[str, int], room: int) -> dict[str, int]:
    """Share `room` among fields: short ones (an error, a value) whole, long ones equally."""
    share: dict[str, int] = {}
    for i, key in enumerate(sorted(lengths, key=lengths.__getitem__)):
        share[key] = min(lengths[key], room // (len(lengths) - i))
        room -= share[key]
    return share


# --------------------------------------------------------------------------- cite


class CitationOut(BaseModel):
    chunk_id: str
    document_title: str
    document_uri: str
    section: str = Field("", description="The heading the passage is under.")
    page_numbers: list[int] = Field(default_factory=list)

    @classmethod
    def of(cls, citation: Citation) -> CitationOut:
        headings = [h for h in citation.headings if h != citation.document_title]
        return cls(
            chunk_id=citation.chunk_id,
            document_title=label(citation.document_title),
            document_uri=label(citation.document_uri, DOCUMENT_LABEL_CHARS),
            section=label(headings[-1]) if headings else "",
            page_numbers=citation.page_numbers,
        )

    def line(self) -> str:
        section = f" › {self.section}" if self.section else ""
        return f"- {self.chunk_id} · {self.document_title}{section}{_pages(self.page_numbers)} · {self.document_uri}"


class CiteOutput(BaseModel):
    session: str
    citations: list[CitationOut]
    repaired: dict[str, str] = Field(default_factory=dict, description="Given id -> the id it was matched to.")
    ignored: list[str] = Field(default_factory=list, description="Ids that could not be resolved.")
    no_evidence: bool = Field(False, description="cite([]) was called: the answer is not from the knowledge base.")
    total_cited: int = Field(0, description="Chunks cited for the current answer so far.")
    omitted: int = Field(0, description="Cited but not listed here (budget).")
    resource: str | None = Field(None, description="Lists every citation, when some are omitted.")


def render_citations(out: CiteOutput) -> str:
    if out.no_evidence:
        return "Recorded: this answer is not based on the knowledge base (no citations)."
    lines = [f"Cited {len(out.citations) + out.omitted} chunk(s) ({out.total_cited} for this answer so far):"]
    lines += [c.line() for c in out.citations]
    if out.omitted:
        lines.append(f"(+{out.omitted} more cited, not listed here; all are in resource {out.resource})")
    lines += [f"note: {given!r} was read as {fixed}" for given, fixed in out.repaired.items()]
    if out.ignored:
        lines.append("ignored (not found): " + ", ".join(repr(i) for i in out.ignored))
    return "\n".join(lines)


def cite_result(model: CiteOutput, state_resource: str, note: str, budget: int) -> tuple[CiteOutput, str]:
    """All citations, or the first ones and a pointer to the state resource; long id lists shortened too."""
    citations, repaired, ignored = model.citations, list(model.repaired.items()), model.ignored
    n = len(citations) + len(repaired) + len(ignored)

    def build(k: int) -> tuple[CiteOutput, str]:
        # Listed in this order: citations, then repairs, then ignored ids (what matters most first).
        c = min(k, len(citations))
        r = min(k - c, len(repaired))
        i = min(k - c - r, len(ignored))
        cut = model.model_copy(
            update={
                "citations": citations[:c],
                "repaired": dict(repaired[:r]),
                "ignored": ignored[:i] + ([f"... {len(ignored) - i} more"] if i < len(ignored) else []),
                "omitted": len(citations) - c,
                "resource": state_resource if c < len(citations) or r < len(repaired) else None,
            }
        )
        return cut, render_citations(cut) + note

    return largest_fit(build, n, budget)


# --------------------------------------------------------------------------- analysis_state


class ExecutionSummary(BaseModel):
    index: int
    success: bool
    duration_ms: float
    code: str = Field(description="First line of the code.")


class StateOutput(BaseModel):
    session: str
    document_filter: str | None
    analysis_number: int
    executions_total: int
    executions: list[ExecutionSummary] = Field(description="The latest executions.")
    searches_total: int
    searches: list[str] = Field(description="The latest queries of this analysis.")
    citations_total: int = Field(description="Chunks cited for the current answer.")
    citations: list[CitationOut] = Field(description="The latest of them.")
    citation_index_size: int
    resource: str = Field(description="Resource with the full state, including every program and its output.")
    execution_resource: str = Field(description="One execution in full ({n}: its number).")


def render_state(out: StateOutput) -> str:
    failed = sum(1 for e in out.executions if not e.success)
    lines = [
        f"session {out.session} · analysis #{out.analysis_number} · filter: {out.document_filter or 'none'}",
        f"full state: {out.resource}",
        f"executions: {out.executions_total}{_latest(out.executions, out.executions_total)}"
        + (f", {failed} failed" if failed else "")
        + (f" (each in full: {out.execution_resource})" if out.executions else ""),
    ]
    lines += [f"#{e.index} {'ok' if e.success else 'failed'} {e.duration_ms:.0f} ms: {e.code}" for e in out.executions]
    searches = ", ".join(repr(s) for s in out.searches)
    lines.append(f"searches: {out.searches_total}{_latest(out.searches, out.searches_total)}: {searches or '-'}")
    lines.append(
        f"citations: {out.citations_total} for this answer{_latest(out.citations, out.citations_total)}; "
        f"{out.citation_index_size} ever cited"
    )
    lines += [c.line() for c in out.citations]
    return "\n".join(lines)


def _latest(shown: list[Any], total: int) -> str:
    return f" (the last {len(shown)} shown)" if len(shown) < total else ""


def first_line(code: str, limit: int = 100) -> str:
    """The first non-blank line of a program (at most `limit` characters) and how many lines follow."""
    lines = [line for line in code.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    head = lines[0][:limit] + (" …" if len(lines[0]) > limit else "")
    return head + (f" (+{len(lines) - 1} lines)" if len(lines) > 1 else "")


def state_result(full: StateOutput, note: str, budget: int, latest: int = 20) -> tuple[StateOutput, str]:
    """The last `latest` executions, searches and citations; fewer of each to fit the budget."""

    def build(k: int) -> tuple[StateOutput, str]:
        model = full.model_copy(
            update={name: getattr(full, name)[-k:] if k else [] for name in ("executions", "searches", "citations")}
        )
        return model, render_state(model) + note

    return largest_fit(build, min(latest, max(len(full.executions), len(full.searches), len(full.citations))), budget)


# --------------------------------------------------------------------------- new_analysis


class NewAnalysisOutput(BaseModel):
    session: str
    analysis_number: int
    message: str
