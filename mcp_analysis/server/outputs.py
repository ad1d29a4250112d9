"""Tool results: a structured model (the output schema) plus concise text for the model.

Both channels are kept inside ``server.max_result_chars`` (default sized for a host's
25k-token tool-result limit). Anything cut stays readable in full through a
session resource, and the text says which.
"""

from __future__ import annotations

from typing import Any

from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel, Field

from mcp_analysis.sandbox.output import truncate
from mcp_analysis.search.models import SearchResult
from mcp_analysis.session.state import Citation


class SearchOutput(BaseModel):
    session: str = Field(description="Analysis session handle.")
    query: str
    results: list[SearchResult]
    truncated: bool = Field(False, description="Hit contents were shortened to fit the result budget.")


class DocumentInfo(BaseModel):
    id: str
    title: str
    uri: str
    created_at: str
    metadata: dict[str, Any] = Field(default_factory=dict)


class ListDocumentsOutput(BaseModel):
    session: str
    total: int = Field(description="Documents visible to this client.")
    offset: int
    documents: list[DocumentInfo]
    next_offset: int | None = Field(None, description="Pass as `offset` to get the next page; null at the end.")


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


class CitationOut(BaseModel):
    chunk_id: str
    document_id: str
    document_title: str
    document_uri: str
    page_numbers: list[int] = Field(default_factory=list)
    headings: list[str] = Field(default_factory=list)
    snippet: str = ""

    @classmethod
    def of(cls, citation: Citation, snippet_chars: int = 300) -> CitationOut:
        snippet = " ".join(citation.content.split())
        if len(snippet) > snippet_chars:
            snippet = snippet[:snippet_chars].rsplit(" ", 1)[0] + " …"
        return cls(
            chunk_id=citation.chunk_id,
            document_id=citation.document_id,
            document_title=citation.document_title,
            document_uri=citation.document_uri,
            page_numbers=citation.page_numbers,
            headings=citation.headings,
            snippet=snippet,
        )


class CiteOutput(BaseModel):
    session: str
    citations: list[CitationOut]
    repaired: dict[str, str] = Field(default_factory=dict, description="Given id -> the id it was matched to.")
    ignored: list[str] = Field(default_factory=list, description="Ids that could not be resolved.")
    no_evidence: bool = Field(False, description="cite([]) was called: the answer is not from the knowledge base.")
    total_cited: int = Field(0, description="Chunks cited for the current answer so far.")


class ExecutionSummary(BaseModel):
    index: int
    success: bool
    duration_ms: float
    code: str
    resource: str


class StateOutput(BaseModel):
    session: str
    document_filter: str | None
    analysis_number: int
    executions: list[ExecutionSummary]
    searches: list[str]
    citations: list[CitationOut]
    citation_index_size: int
    resource: str = Field(description="Resource with the full state, including every program and its output.")


class NewAnalysisOutput(BaseModel):
    session: str
    analysis_number: int
    message: str


# --------------------------------------------------------------------------- text


def session_note(session_id: str, must_pass: bool) -> str:
    if not must_pass:
        return ""
    return (
        f'\n\nsession: {session_id} — pass session="{session_id}" in your next calls to keep '
        "your variables, searches and citations."
    )


def result(model: BaseModel, text: str, budget: int) -> CallToolResult:
    text, _ = truncate(text, budget)
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=model.model_dump(mode="json")
    )


def render_search(out: SearchOutput) -> str:
    if not out.results:
        return f'No results for "{out.query}".'
    lines = [f'{len(out.results)} result(s) for "{out.query}". Cite with the chunk_id.']
    for r in out.results:
        pages = f" — p. {', '.join(map(str, r.page_numbers))}" if r.page_numbers else ""
        heading = f" — {' > '.join(r.headings[1:] or r.headings)}" if r.headings else ""
        lines.append(f"\n[{r.rank}] {r.document_title}{pages}{heading}")
        lines.append(f"chunk_id: {r.chunk_id} | document_id: {r.document_id} | score {r.score:.4f}")
        lines.append(r.content)
    return "\n".join(lines)


def fit_search(out: SearchOutput, budget: int) -> SearchOutput:
    """Shorten hit contents evenly until text and structured content both fit half the budget."""
    share = budget // 2
    cap = max(400, share // max(1, len(out.results)))
    while len(render_search(out)) > share and cap > 200:
        out = out.model_copy(
            update={
                "results": [
                    r.model_copy(update={"content": truncate(r.content, cap)[0]}) if len(r.content) > cap else r
                    for r in out.results
                ],
                "truncated": True,
            }
        )
        cap = int(cap * 0.8)
    return out


def render_documents(out: ListDocumentsOutput) -> str:
    if not out.documents:
        return "No documents are visible." if out.total == 0 else f"No documents at offset {out.offset}."
    end = out.offset + len(out.documents)
    lines = [f"Documents {out.offset + 1}-{end} of {out.total} (id | title | uri):"]
    lines += [f"- {d.id} | {d.title} | {d.uri}" for d in out.documents]
    if out.next_offset is not None:
        lines.append(f"More: call list_documents(offset={out.next_offset}).")
    lines.append("Files per document: /documents/{id}/metadata.json, content.txt, items.jsonl, toc.json")
    return "\n".join(lines)


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
        parts.append(f"(output shortened; the full output is in resource {out.full_output})")
    return "\n".join(parts)


def fit_execution(out: ExecuteOutput, budget: int, full_output_uri: str) -> ExecuteOutput:
    share = budget // 2
    if len(render_execution(out)) <= share:
        return out
    room = max(1000, share - 600)
    fields = {"stdout": out.stdout, "stderr": out.stderr, "value": out.value or "", "error": out.error or ""}
    total = sum(len(v) for v in fields.values()) or 1
    cut = {k: truncate(v, max(200, room * len(v) // total))[0] if v else v for k, v in fields.items()}
    return out.model_copy(
        update={
            "stdout": cut["stdout"],
            "stderr": cut["stderr"],
            "value": cut["value"] if out.value is not None else None,
            "error": cut["error"] if out.error is not None else None,
            "truncated": True,
            "full_output": full_output_uri,
        }
    )


def render_citations(out: CiteOutput) -> str:
    if out.no_evidence:
        return "Recorded: this answer is not based on the knowledge base (no citations)."
    lines = [f"Cited {len(out.citations)} chunk(s) ({out.total_cited} for this answer so far):"]
    for c in out.citations:
        pages = f", p. {', '.join(map(str, c.page_numbers))}" if c.page_numbers else ""
        lines.append(f"- {c.document_title}{pages} — {c.document_uri} [{c.chunk_id}]")
    for given, fixed in out.repaired.items():
        lines.append(f"note: {given!r} was read as {fixed}")
    if out.ignored:
        lines.append("ignored (not found): " + ", ".join(repr(i) for i in out.ignored))
    return "\n".join(lines)


def render_state(out: StateOutput) -> str:
    lines = [
        f"session {out.session}, analysis #{out.analysis_number}, filter: {out.document_filter or 'none'}",
        f"executions: {len(out.executions)} ({sum(1 for e in out.executions if not e.success)} failed)",
        f"searches: {', '.join(repr(s) for s in out.searches) or 'none'}",
        f"citations: {len(out.citations)} for this answer; {out.citation_index_size} ever cited",
        f"full state: {out.resource}",
    ]
    return "\n".join(lines)
