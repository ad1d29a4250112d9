"""The `analysis_state` and `new_analysis` results: a session in brief, latest entries first to go."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from mcp_analysis.text import label
from mcp_analysis.tooling.citing import CitationOut
from mcp_analysis.tooling.fitting import largest_fit

if TYPE_CHECKING:
    from mcp_analysis.session.state import AnalysisState

LATEST = 20  # executions, searches and citations shown at most; the state resource has them all


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

    @classmethod
    def of(cls, session: str, state: AnalysisState, resource: str, execution_resource: str) -> StateOutput:
        """All of a session's state in brief; `resource` and `execution_resource` hold it in full."""
        return cls(
            session=session,
            document_filter=state.document_filter,
            analysis_number=state.analysis_number,
            executions_total=len(state.executions),
            executions=[
                ExecutionSummary(
                    index=e.index, success=e.success, duration_ms=round(e.duration_ms, 1), code=first_line(e.code)
                )
                for e in state.executions
            ],
            searches_total=len(state.searches),
            searches=[label(q) for q in state.searches],
            citations_total=len(state.citations),
            citations=[CitationOut.of(state.citation_index[c]) for c in state.citations if c in state.citation_index],
            citation_index_size=len(state.citation_index),
            resource=resource,
            execution_resource=execution_resource,
        )


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


def state_result(full: StateOutput, note: str, budget: int, latest: int = LATEST) -> tuple[StateOutput, str]:
    """The last `latest` executions, searches and citations; fewer of each to fit the budget."""

    def build(k: int) -> tuple[StateOutput, str]:
        model = full.model_copy(
            update={name: getattr(full, name)[-k:] if k else [] for name in ("executions", "searches", "citations")}
        )
        return model, render_state(model) + note

    return largest_fit(build, min(latest, max(len(full.executions), len(full.searches), len(full.citations))), budget)


class NewAnalysisOutput(BaseModel):
    session: str
    analysis_number: int
    message: str


def new_analysis_result(session: str, analysis_number: int, note: str) -> tuple[NewAnalysisOutput, str]:
    model = NewAnalysisOutput(
        session=session,
        analysis_number=analysis_number,
        message="New analysis started: the interpreter is empty and no citations are registered.",
    )
    return model, model.message + note
