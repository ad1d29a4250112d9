"""The resources (each document's /documents files, each session's state, executions and charts) and completion.

Everything here reads through `caller_corpus` or `caller_session`, so the caller's
document filter (the server's ``--filter`` and the token's) can never be forgotten.
`list_resources` serves the paged, per-caller `resources/list` (`resource_page`) in place
of the SDK's handler. Every handler goes through the error contract (server/errors.py).
"""

from __future__ import annotations

import base64
import functools
import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from mcp.server import MCPServer
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    Completion,
    ListResourcesResult,
    PaginatedRequestParams,
    Resource,
    ResourceTemplateReference,
)

from mcp_analysis.errors import AnalysisError, TableTooLargeError
from mcp_analysis.server import uris
from mcp_analysis.server.calls import runtime_of
from mcp_analysis.server.csv_export import for_people
from mcp_analysis.server.errors import protocol_error, user_errors
from mcp_analysis.server.identity import caller_filter
from mcp_analysis.server.runtime import Runtime
from mcp_analysis.server.sdk_compat import lowlevel_server
from mcp_analysis.text import label

if TYPE_CHECKING:
    from mcp_analysis.corpus import Corpus
    from mcp_analysis.session.analysis import AnalysisSession
    from mcp_analysis.store.models import DocumentMeta

DOCUMENT_FILE_DESCRIPTIONS = {
    "metadata.json": "A document's id, title, uri, created_at and metadata.",
    "content.txt": "A document's full text (markdown, tables as markdown).",
    "items.jsonl": "A document's items (one JSON object per line, with self_ref and label).",
    "toc.json": "A document's section tree with item ranges and chunk ids.",
    "tables.json": "A document's tables: index, name, title, notes, header, header_row, footer, total_rows, rows, "
    "columns, size, pages, chunk ids, path.",
}
CHART_DESCRIPTIONS = {
    "png": "A chart drawn by `await chart(spec)` in execute_code, as PNG (numbered per session).",
    "svg": "A chart drawn by `await chart(spec)` in execute_code, as SVG.",
    "json": "The Vega-Lite spec of a chart drawn in execute_code, its data rows included.",
}
COMPLETIONS = 100  # document ids offered at most


async def caller_corpus(runtime: Runtime) -> Corpus:
    """The knowledge base as the caller of the current request may see it (their document filter)."""
    runtime = await runtime.ready()
    assert runtime.kb is not None
    _, document_filter = caller_filter(runtime)
    return runtime.kb.corpus(document_filter)


async def caller_session(ctx: Context, session_id: str) -> AnalysisSession:
    """An existing session by its id, if the caller owns it and reads with the same filter."""
    runtime = await runtime_of(ctx).ready()
    assert runtime.sessions is not None
    owner, document_filter = caller_filter(runtime)
    try:
        return await runtime.sessions.resolve(session_id, owner=owner, document_filter=document_filter, fresh=False)
    except AnalysisError as exc:
        raise ResourceNotFoundError(str(exc)) from None


# ----------------------------------------------------------------------------- documents


async def _visible(document_id: str, ctx: Context) -> tuple[Corpus, DocumentMeta]:
    corpus = await caller_corpus(runtime_of(ctx))
    meta = await corpus.find(document_id)
    if meta is None:
        successor = runtime_of(ctx).updates.successor(document_id)
        if successor is not None and await corpus.find(successor) is not None:
            raise ResourceNotFoundError(
                f"Document {document_id} was replaced when its file changed: it is now {successor} "
                f"({uris.document_file(successor, 'content.txt')})."
            )
        raise ResourceNotFoundError(f"No document {label(document_id)!r} (unknown, or outside your filter).")
    return corpus, meta


async def document_file(document_id: str, name: str, ctx: Context) -> str:
    """One of a document's /documents files, rendered as the sandbox sees it."""
    from mcp_analysis.sandbox.vfs import DocumentsFS  # LanceDB-backed: loaded with the runtime, not before

    corpus, meta = await _visible(document_id, ctx)
    return await DocumentsFS(corpus).render(meta, name)


def document_file_reader(name: str) -> Callable[[str, Context], Awaitable[str]]:
    """The resource handler of one file name (a template's parameters are its handler's)."""

    async def read(document_id: str, ctx: Context) -> str:
        return await document_file(document_id, name, ctx)

    read.__name__ = f"read_{name.replace('.', '_')}"
    return read


async def table_csv(document_id: str, index: str, ctx: Context) -> str:
    """One table of a document from its header row (the sandbox's /documents/{id}/tables/{index}.csv),
    formula cells neutralised for the people who open it (server/csv_export.py), refused past
    `server.max_table_resource_chars` before it is decompressed."""
    from mcp_analysis.sandbox.vfs import table_index  # LanceDB-backed: loaded with the runtime, not before

    corpus, meta = await _visible(document_id, ctx)
    number = table_index(meta, f"tables/{index}.csv")
    limit = runtime_of(ctx).settings.server.max_table_resource_chars
    try:
        return for_people(await corpus.table_csv(meta.id, number, limit))
    except TableTooLargeError as exc:
        raise ResourceError(
            f"Table {number} of document {meta.id} is {exc.measure} of CSV, more than one resource read "
            f"returns (server.max_table_resource_chars={limit:,}). Read it in execute_code, where code can take "
            f"the rows it needs: Path('/documents/{meta.id}/tables/{number}.csv').read_text().splitlines(); "
            "tables.json gives its size and header."
        ) from None


@user_errors(protocol_error)
async def resource_page(runtime: Runtime, cursor: str | None) -> tuple[list[Resource], str | None]:
    """One page of the caller's /documents files as resources, and the cursor of the next."""
    documents = await (await caller_corpus(runtime)).documents()
    page = runtime.settings.server.resource_page_size
    offset = decode_cursor(cursor)
    names = list(uris.DOCUMENT_FILES)
    total = len(documents) * len(names)
    entries: list[Resource] = []
    for position in range(offset, min(total, offset + page)):
        meta = documents[position // len(names)]
        name = names[position % len(names)]
        entries.append(
            Resource(
                uri=uris.document_file(meta.id, name),
                name=f"{meta.id}/{name}",
                title=meta.title if name == "content.txt" else f"{meta.title} — {name}",
                description=f"{name} of '{meta.title}' ({meta.uri})",
                mime_type=uris.DOCUMENT_FILES[name],
                size=meta.content_size if name == "content.txt" else None,
            )
        )
    more = offset + page < total
    return entries, encode_cursor(offset + page) if more else None


def encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"o:{offset}".encode()).decode()


def decode_cursor(cursor: str | None) -> int:
    if not cursor:
        return 0
    try:
        kind, _, value = base64.urlsafe_b64decode(cursor.encode()).decode().partition(":")
        offset = int(value)
        if kind != "o" or offset < 0:
            raise ValueError(cursor)
    except (ValueError, UnicodeDecodeError):
        raise MCPError(code=INVALID_PARAMS, message="Invalid cursor: pass next_cursor from the last page.") from None
    return offset


# ----------------------------------------------------------------------------- sessions


async def session_state(session_id: str, ctx: Context) -> str:
    """Executions (code and output), searches, citations and charts (by resource) of a session, as JSON."""
    analysis = await caller_session(ctx, session_id)
    state = analysis.state.model_dump(mode="json", exclude={"charts": {"__all__": {"png", "svg", "spec"}}})
    for chart in state["charts"]:
        chart["resources"] = [uris.session_chart(analysis.id, chart["index"], e) for e in uris.SESSION_CHART_FILES]
    state["session"] = analysis.id
    return json.dumps(state, ensure_ascii=False, indent=2)


async def session_execution(session_id: str, index: str, ctx: Context) -> str:
    """The code of one execution and its full, untruncated output, as JSON."""
    analysis = await caller_session(ctx, session_id)
    for entry in analysis.state.executions:
        if str(entry.index) == index:
            return entry.model_dump_json(indent=2)
    missing = label(index, 20)  # as given: it may be anything
    raise ResourceNotFoundError(f"Session {analysis.id} has no execution {missing} in its current analysis.")


async def session_chart(session_id: str, n: str, extension: str, ctx: Context) -> str | bytes:
    """One file of a chart the session keeps: the PNG's bytes, the SVG, or the spec as JSON."""
    analysis = await caller_session(ctx, session_id)
    chart = analysis.state.chart(int(n)) if n.isdecimal() and len(n) < 10 else None
    if chart is None:
        charts = analysis.kb.settings.charts
        raise ResourceNotFoundError(
            f"Session {analysis.id} keeps no chart {label(n, 20)}: it keeps the latest {charts.max_kept} charts "
            f"of its current analysis (charts.max_kept, charts.max_kept_mb, and within the server's memory for "
            f"sessions, sessions.max_memory_mb: older ones are dropped), numbered "
            f"from 1; new_analysis clears them. Draw it again with `await chart(spec)` in execute_code."
        )
    if extension == "png":
        return chart.png
    if extension == "svg":
        return chart.svg
    return json.dumps(chart.spec, ensure_ascii=False)


def session_chart_reader(extension: str) -> Callable[[str, str, Context], Awaitable[str | bytes]]:
    async def read(session_id: str, n: str, ctx: Context) -> str | bytes:
        return await session_chart(session_id, n, extension, ctx)

    read.__name__ = f"read_chart_{extension}"
    return read


# ----------------------------------------------------------------------------- completion


async def complete_document_id(runtime: Runtime, ref: Any, argument: Any, context: Any) -> Completion | None:
    """Document ids for a `{document_id}` template argument: by id prefix, then by words of the title."""
    if not isinstance(ref, ResourceTemplateReference) or argument.name != "document_id":
        return None
    prefix = (argument.value or "").lower()
    documents = await (await caller_corpus(runtime)).documents()
    matches = [d.id for d in documents if d.id.startswith(prefix)]
    matches += [d.id for d in documents if prefix and prefix in d.title.lower() and d.id not in matches]
    return Completion(values=matches[:COMPLETIONS], total=len(matches), has_more=len(matches) > COMPLETIONS)


class ResourceSpec(NamedTuple):
    """A resource template, what a client reads about it, and its handler (behind the error contract)."""

    template: str
    name: str
    title: str
    description: str
    mime_type: str
    fn: Callable[..., Awaitable[str | bytes]]


def resource_specs() -> list[ResourceSpec]:
    """Every resource template the server registers."""
    specs = [
        ResourceSpec(
            uris.document_file_template(name),
            f"document-{name.replace('.', '-')}",
            f"Document {name}",
            DOCUMENT_FILE_DESCRIPTIONS[name],
            mime,
            document_file_reader(name),
        )
        for name, mime in uris.DOCUMENT_FILES.items()
    ]
    specs += [
        ResourceSpec(
            uris.DOCUMENT_TABLE_CSV,
            "document-table-csv",
            "Document table (CSV)",
            "One table of a document as RFC 4180 CSV from its header row (title, notes and footer are in "
            "tables.json); cells that would run as spreadsheet formulas start with ' (raw values: execute_code).",
            "text/csv",
            table_csv,
        ),
        ResourceSpec(
            uris.SESSION_STATE,
            "analysis-state",
            "Analysis session state",
            "Executions (code and output), searches and citations of an analysis session.",
            "application/json",
            session_state,
        ),
        ResourceSpec(
            uris.SESSION_EXECUTION,
            "analysis-execution",
            "One execute_code call",
            "The code of one execution and its full, untruncated output.",
            "application/json",
            session_execution,
        ),
    ]
    specs += [
        ResourceSpec(
            uris.session_chart_template(extension),
            f"analysis-chart-{extension}",
            f"A chart, {extension.upper()}",
            CHART_DESCRIPTIONS[extension],
            mime,
            session_chart_reader(extension),
        )
        for extension, mime in uris.SESSION_CHART_FILES.items()
    ]
    return specs


async def list_resources(ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams) -> ListResourcesResult:
    """`resources/list`, built once per request: one page of the caller's documents' files.

    It replaces the SDK's handler, which would list the server's static resources only to
    have the page put in their place (the view's ``ui://`` resource is for hosts of the
    extension, which find it through the tools' ``_meta``, not through this list)."""
    entries, next_cursor = await resource_page(runtime_of(ctx), params.cursor)
    return ListResourcesResult(resources=entries, next_cursor=next_cursor)


def register_resources(server: MCPServer[Any], runtime: Runtime) -> None:
    """Add the resource templates, the paged `resources/list` and the completion handler to `server`."""
    for spec in resource_specs():
        server.resource(
            spec.template, name=spec.name, title=spec.title, description=spec.description, mime_type=spec.mime_type
        )(user_errors(ResourceError)(spec.fn))
    lowlevel_server(server).add_request_handler("resources/list", PaginatedRequestParams, list_resources)
    # The SDK hands a completion handler no request context: the runtime is bound to it here.
    server.completion()(functools.partial(user_errors(protocol_error)(complete_document_id), runtime))
