"""The MCP tools: four analysis tools and two session tools, each a plain async function.

A tool resolves the caller's session (`tool_call`), calls the same `AnalysisSession`
method the CLI and the Python API call, and shapes the result with the shared models of
`mcp_analysis.tooling`; what the model reads about it is in `tooling.descriptions`.
`register_tools` adds them to a server, each behind the error contract (server/errors.py).
Any of them can be registered alone, on any server whose lifespan yields a `Runtime`.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Annotated, Any, NamedTuple, TypeVar

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from mcp_analysis.errors import AnalysisError
from mcp_analysis.server import uris
from mcp_analysis.server.calls import tool_call
from mcp_analysis.server.errors import user_errors
from mcp_analysis.server.sdk_compat import progress_wanted
from mcp_analysis.tooling import descriptions as text
from mcp_analysis.tooling.chart_output import ChartOut, ChartResource, png_data
from mcp_analysis.tooling.citing import CiteOutput, cite_result
from mcp_analysis.tooling.descriptions import (
    DOCUMENTS_PAGE,
    ChunkIds,
    Code,
    HitLimit,
    PageOffset,
    PageSize,
    PassageChars,
    Query,
)
from mcp_analysis.tooling.document_list import DocumentInfo, ListDocumentsOutput, documents_result
from mcp_analysis.tooling.execution import ExecuteOutput, execution_result
from mcp_analysis.tooling.search_hits import SearchOutput, search_result
from mcp_analysis.tooling.state_summary import NewAnalysisOutput, StateOutput, new_analysis_result, state_result

if TYPE_CHECKING:
    from mcp_analysis.session.analysis import AnalysisSession

log = logging.getLogger(__name__)
T = TypeVar("T")

SessionHandle = Annotated[
    str | None,
    Field(
        description="Analysis session handle. Leave empty over stdio; over HTTP without sessions pass back "
        "the `session` value of an earlier result to keep your variables and citations."
    ),
]


async def search(
    query: Query,
    ctx: Context,
    limit: HitLimit = None,
    context: PassageChars = None,
    session: SessionHandle = None,
) -> Annotated[CallToolResult, SearchOutput]:
    """Hybrid search; passages of `context` characters, shortened (then fewer hits) to fit the budget."""
    call = await tool_call(ctx, session)
    results = await call.analysis.search(query, limit)
    limits = call.settings.search
    return call.reply(
        search_result(
            call.analysis.id,
            query,
            results,
            context or limits.context_chars,
            limits.max_context_chars,
            call.note,
            call.budget,
            content_resource=uris.document_file("{document_id}", "content.txt"),
        )
    )


async def list_documents(
    ctx: Context,
    offset: PageOffset = 0,
    limit: PageSize = DOCUMENTS_PAGE,
    session: SessionHandle = None,
) -> Annotated[CallToolResult, ListDocumentsOutput]:
    """One page of the documents the caller may see (their filter applies)."""
    call = await tool_call(ctx, session)
    documents = await call.analysis.list_documents()
    page = [DocumentInfo.of(d) for d in documents[offset : offset + limit]]
    return call.reply(documents_result(call.analysis.id, page, len(documents), offset, call.note, call.budget))


async def execute_code(
    code: Code, ctx: Context, session: SessionHandle = None
) -> Annotated[CallToolResult, ExecuteOutput]:
    """Run code in the session's interpreter; progress every second; the whole output stays a resource."""
    call = await tool_call(ctx, session)
    analysis = call.analysis
    result = await with_progress(ctx, call.settings.sandbox.code_timeout, analysis.execute(code))
    index = analysis.state.execution_counter
    charts = [ChartOut.of(c, chart_resource(analysis, c.index), result.charts_not_kept) for c in result.charts]
    model = ExecuteOutput.of(analysis.id, index, result, charts)
    full_output = uris.session_execution(analysis.id, index)
    pngs = [png_data(c) for c in result.charts]
    model, text, attached = execution_result(model, full_output, call.note, call.budget, pngs)
    return call.reply((model, text), attached)


def chart_resource(analysis: AnalysisSession, index: int) -> ChartResource:
    """Where the session keeps chart `index`, by file extension (None: it did not keep it)."""
    if analysis.state.chart(index) is None:
        return None
    return functools.partial(uris.session_chart, analysis.id, index)


async def cite(
    chunk_ids: ChunkIds, ctx: Context, session: SessionHandle = None
) -> Annotated[CallToolResult, CiteOutput]:
    """Register citations; the state resource lists them all when the result cannot."""
    call = await tool_call(ctx, session)
    analysis = call.analysis
    outcome = await analysis.cite(chunk_ids)
    model = CiteOutput.of(analysis.id, outcome, total_cited=len(analysis.state.citations), passages=call.view)
    return call.reply(cite_result(model, uris.session_state(analysis.id), call.note, call.budget))


async def new_analysis(ctx: Context, session: SessionHandle = None) -> Annotated[CallToolResult, NewAnalysisOutput]:
    """Clear the session's analysis (variables, executions, searches, citations)."""
    call = await tool_call(ctx, session)
    await call.analysis.new_analysis()
    return call.reply(new_analysis_result(call.analysis.id, call.analysis.state.analysis_number, call.note))


async def analysis_state(ctx: Context, session: SessionHandle = None) -> Annotated[CallToolResult, StateOutput]:
    """The session in brief, pointing at the resources that hold it in full."""
    call = await tool_call(ctx, session)
    analysis = call.analysis
    summary = StateOutput.of(
        analysis.id,
        analysis.state,
        resource=uris.session_state(analysis.id),
        execution_resource=uris.session_execution(analysis.id, "{n}"),
    )
    return call.reply(state_result(summary, call.note, call.budget))


async def with_progress(ctx: Context, timeout: float, work: Awaitable[T]) -> T:
    """Await `work`, telling the client every second how long it has run (out of `timeout`),
    if it asked for progress: the reporting task costs ~0.15 ms of every call."""
    if not progress_wanted(ctx.request_context):
        return await work
    started = time.monotonic()

    async def progress() -> None:
        while True:
            await anyio.sleep(1.0)
            elapsed = time.monotonic() - started
            try:
                await ctx.report_progress(min(elapsed, timeout), timeout, f"running for {elapsed:.0f} s")
            except Exception as exc:  # progress is advisory: a closed stream must not fail the call
                log.debug("progress not delivered: %s", exc)
                return

    failure: AnalysisError | None = None
    async with anyio.create_task_group() as tg:
        tg.start_soon(progress)
        try:
            result = await work
        except AnalysisError as exc:
            # Raised after the group closes: raised inside it, it would reach the SDK as an
            # ExceptionGroup and the client would see only "Error executing tool execute_code".
            failure = exc
        finally:
            tg.cancel_scope.cancel()
    if failure is not None:
        raise failure
    return result


class ToolSpec(NamedTuple):
    """A tool, what a model reads about it, and how it behaves (MCP tool annotations)."""

    fn: Callable[..., Awaitable[CallToolResult]]
    description: str
    hints: ToolAnnotations


READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
RUNS_CODE = ToolAnnotations(read_only_hint=True, idempotent_hint=False, destructive_hint=False, open_world_hint=False)
RECORDS = ToolAnnotations(read_only_hint=False, idempotent_hint=True, destructive_hint=False)
CLEARS = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False)

TOOLS = (
    ToolSpec(search, text.SEARCH, READ_ONLY),
    ToolSpec(list_documents, text.LIST_DOCUMENTS, READ_ONLY),
    ToolSpec(execute_code, text.EXECUTE_CODE, RUNS_CODE),
    ToolSpec(cite, text.CITE, RECORDS),
    ToolSpec(new_analysis, text.NEW_ANALYSIS, CLEARS),
    ToolSpec(analysis_state, text.ANALYSIS_STATE, READ_ONLY),
)


def register_tools(server: MCPServer[Any], tools: Sequence[ToolSpec] = TOOLS) -> None:
    """Add `tools` to `server`; a user error raised in one reaches the client as its message."""
    for tool in tools:
        server.add_tool(user_errors(ToolError)(tool.fn), description=tool.description, annotations=tool.hints)
