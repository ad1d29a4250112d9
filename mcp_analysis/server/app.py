"""The MCP server: four analysis tools plus session tools, /documents resources, a prompt.

The layer is thin: each handler resolves the caller's `AnalysisSession`
(server/identity.py), calls the same method the CLI and the Python API call, and
shapes the result (server/outputs.py).
"""

from __future__ import annotations

import base64
import functools
import inspect
import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import anyio
from mcp.server import MCPServer
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp.server.subscriptions import InMemorySubscriptionBus
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    CallToolResult,
    Completion,
    Resource,
    ResourceTemplateReference,
    ToolAnnotations,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import AnyHttpUrl, Field

from mcp_analysis import __version__
from mcp_analysis.config import Settings, load_settings, with_db
from mcp_analysis.errors import AnalysisError
from mcp_analysis.prompts import ANALYZE_PROMPT, EXECUTE_CODE_DOC, INSTRUCTIONS
from mcp_analysis.sandbox.output import clip
from mcp_analysis.search.excerpt import label
from mcp_analysis.server import outputs as out
from mcp_analysis.server.auth import StaticTokenVerifier, load_tokens
from mcp_analysis.server.identity import caller_filter, session_for
from mcp_analysis.server.runtime import Runtime
from mcp_analysis.session.scope import session_call_scope

if TYPE_CHECKING:
    from mcp_analysis.session.analysis import AnalysisSession

log = logging.getLogger(__name__)

DOC_FILES = {
    "metadata.json": "application/json",
    "content.txt": "text/plain",
    "items.jsonl": "application/jsonl",
    "toc.json": "application/json",
}
DOCUMENTS_PAGE = 40
ContextArg = Annotated[
    int | None,
    Field(
        description="Characters of each hit's passage to show (default 900).",
        ge=100,
        le=100_000,
    ),
]
SessionArg = Annotated[
    str | None,
    Field(
        description="Analysis session handle. Leave empty over stdio; over HTTP without sessions pass back "
        "the `session` value of an earlier result to keep your variables and citations."
    ),
]


def doc_uri(document_id: str, name: str) -> str:
    return f"documents:///{document_id}/{name}"


def state_uri(session_id: str) -> str:
    return f"analysis://sessions/{session_id}/state"


def execution_uri(session_id: str, index: int | str) -> str:
    return f"analysis://sessions/{session_id}/executions/{index}"


class AnalysisServer(MCPServer):
    """MCPServer with a shared runtime (paged, per-caller `resources/list` is a middleware)."""

    runtime: Runtime


ERROR_CHARS = 2000  # an error message past this keeps its head and tail


def _user_errors(error: Callable[[str], Exception]) -> Callable[[Any], Any]:
    """Decorator: a user error (AnalysisError) raised by an async handler reaches the client with its message.

    The SDK reports any other exception from a tool, resource or completion handler without its
    message ("Error executing tool search", "Internal server error"), so every handler goes through
    this: `error` builds what the SDK passes on (ToolError, ResourceError, MCPError).
    """

    def wrap(fn: Any) -> Any:
        @functools.wraps(fn)
        async def run(*args: Any, **kwargs: Any) -> Any:
            try:
                return await fn(*args, **kwargs)
            except AnalysisError as exc:  # a message may echo what the client sent: head and tail only
                raise error(clip(str(exc), ERROR_CHARS, "left out")[0]) from None

        return run

    return wrap


def _protocol_error(message: str) -> MCPError:
    return MCPError(code=INTERNAL_ERROR, message=message)


@_user_errors(_protocol_error)
async def _resource_page(runtime: Runtime, cursor: str | None) -> tuple[list[Resource], str | None]:
    """One page of the caller's /documents files as resources, and the cursor of the next."""
    runtime = await runtime.ready()
    assert runtime.kb is not None
    _, document_filter = caller_filter(runtime)
    documents = await runtime.kb.corpus(document_filter).documents()
    page = runtime.settings.server.resource_page_size
    offset = _decode_cursor(cursor)
    names = list(DOC_FILES)
    total = len(documents) * len(names)
    entries: list[Resource] = []
    for position in range(offset, min(total, offset + page)):
        meta = documents[position // len(names)]
        name = names[position % len(names)]
        entries.append(
            Resource(
                uri=doc_uri(meta.id, name),
                name=f"{meta.id}/{name}",
                title=meta.title if name == "content.txt" else f"{meta.title} — {name}",
                description=f"{name} of '{meta.title}' ({meta.uri})",
                mime_type=DOC_FILES[name],
                size=meta.content_size if name == "content.txt" else None,
            )
        )
    more = offset + page < total
    return entries, _encode_cursor(offset + page) if more else None


def _invalid_text(value: Any, where: str = "params") -> str | None:
    """Where in `value` a string that cannot be UTF-8 encoded sits, if any."""
    stack: list[tuple[Any, str]] = [(value, where)]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return path
        elif isinstance(item, dict):
            stack.extend((v, f"{path}.{k}") for k, v in item.items())
            stack.extend((k, f"{path} (a key)") for k in item if isinstance(k, str))
        elif isinstance(item, list | tuple):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(item))
    return None


def _encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"o:{offset}".encode()).decode()


def _decode_cursor(cursor: str | None) -> int:
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


def create_server(
    db_path: str | Path | None = None,
    config: Settings | None = None,
    *,
    http: bool = False,
) -> AnalysisServer:
    """Build the MCP server for a knowledge base (stdio by default; ``http=True`` adds bearer auth)."""
    settings = config or load_settings()
    if db_path is not None:
        settings = with_db(settings, db_path)
    auth_kwargs: dict[str, Any] = {}
    if http and settings.server.tokens_file is not None:
        base = f"http://{settings.server.host}:{settings.server.port}"
        auth_kwargs = {
            "token_verifier": StaticTokenVerifier(load_tokens(settings.server.tokens_file)),
            "auth": AuthSettings(
                issuer_url=AnyHttpUrl(base), resource_server_url=AnyHttpUrl(f"{base}{settings.server.path}")
            ),
        }
    bus = InMemorySubscriptionBus()
    runtime = Runtime(settings, bus)

    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def lifespan(_: MCPServer) -> Any:
        async with runtime.use():
            yield {}

    server = AnalysisServer(
        "mcp-analysis",
        title="Document analysis",
        version=__version__,
        instructions=INSTRUCTIONS,
        subscriptions=bus,
        lifespan=lifespan,
        log_level=settings.server.log_level,
        **auth_kwargs,
    )
    server.runtime = runtime

    async def remember_legacy_connections(ctx: Any, call_next: Any) -> Any:
        """Handshake-era connections hear list-changed notifications on their own stream."""
        if ctx.request_id is not None and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            runtime.remember_legacy_session(ctx.session)
        return await call_next(ctx)

    async def reject_invalid_text(ctx: Any, call_next: Any) -> Any:
        """Text that is not valid Unicode (a lone surrogate) is refused before any tool sees it.

        Over stdio and HTTP the wire screen already answers such a message (-32600); this
        covers in-process clients, with the same meaning: the request itself is invalid.
        """
        where = _invalid_text(ctx.params)
        if where is not None:
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"Invalid params: {where} holds text that is not valid Unicode (a lone surrogate such as "
                "\\ud800); send UTF-8 text.",
            )
        return await call_next(ctx)

    async def paged_resources(ctx: Any, call_next: Any) -> Any:
        """`resources/list`: the SDK validates and shapes the reply; the page is the caller's documents."""
        result = await call_next(ctx)
        if ctx.method != "resources/list" or not isinstance(result, dict):
            return result
        cursor = (ctx.params or {}).get("cursor")
        entries, next_cursor = await _resource_page(runtime, cursor if isinstance(cursor, str) else None)
        result["resources"] = [e.model_dump(by_alias=True, mode="json", exclude_none=True) for e in entries]
        result.pop("nextCursor", None)
        if next_cursor is not None:
            result["nextCursor"] = next_cursor
        return result

    async def advertise_list_changes(ctx: Any, call_next: Any) -> Any:
        """Handshake-era clients learn from `initialize` that resources/list_changed is sent.

        (2026-07-28 clients learn it from subscriptions/listen being served.)
        """
        result = await call_next(ctx)
        if ctx.method == "initialize" and isinstance(result, dict):
            resources = (result.get("capabilities") or {}).get("resources")
            if isinstance(resources, dict):
                resources["listChanged"] = True
        return result

    server.middleware.extend(
        [
            reject_invalid_text,
            remember_legacy_connections,
            session_call_scope,  # session locks (shared store) span the whole request
            paged_resources,
            advertise_list_changes,
        ]
    )
    budget = settings.server.max_result_chars
    read_only = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)

    # ------------------------------------------------------------------ tools

    def tool(annotations: ToolAnnotations, description: str | None = None) -> Any:
        """Register a tool; its docstring, dedented, is the description the model reads (unless given).

        A user error raised anywhere in the tool reaches the client as a tool error with its message.
        """

        def register(fn: Any) -> Any:
            text = description or inspect.cleandoc(fn.__doc__ or "")
            server.add_tool(_user_errors(ToolError)(fn), description=text, annotations=annotations)
            return fn

        return register

    @tool(read_only)
    async def search(
        query: Annotated[str, Field(description="What to look for (words or a question).")],
        ctx: Context,
        limit: Annotated[int | None, Field(description="Number of hits (default 5).", ge=1, le=50)] = None,
        context: ContextArg = None,
        session: SessionArg = None,
    ) -> Annotated[CallToolResult, out.SearchOutput]:
        """Hybrid (semantic + keyword) search. Each hit: chunk_id (to cite), document, section, pages and
        the passage around the match. Example: search(query="average revenue 2025", limit=5)"""
        analysis, must_pass = await session_for(ctx, session)
        results = await analysis.search(query, limit)
        model, text = out.search_result(
            analysis.id,
            query,
            results,
            context or settings.search.context_chars,
            settings.search.max_context_chars,
            out.session_note(analysis.id, must_pass),
            budget,
        )
        return out.result(model, text, budget)

    @tool(read_only)
    async def list_documents(
        ctx: Context,
        offset: Annotated[int, Field(description="Skip this many documents (paging).", ge=0)] = 0,
        limit: Annotated[int, Field(description="Documents per page.", ge=1, le=1000)] = DOCUMENTS_PAGE,
        session: SessionArg = None,
    ) -> Annotated[CallToolResult, out.ListDocumentsOutput]:
        """List the documents you can see: id | title | uri, one per line, paged.
        Example: list_documents(offset=40)"""
        analysis, must_pass = await session_for(ctx, session)
        documents = await analysis.list_documents()
        chosen = [out.DocumentInfo.of(d) for d in documents[offset : offset + limit]]
        model, text = out.documents_result(
            analysis.id, chosen, len(documents), offset, out.session_note(analysis.id, must_pass), budget
        )
        return out.result(model, text, budget)

    @tool(
        ToolAnnotations(read_only_hint=True, idempotent_hint=False, destructive_hint=False, open_world_hint=False),
        description=EXECUTE_CODE_DOC,
    )
    async def execute_code(
        code: Annotated[str, Field(description="Python source to run.")],
        ctx: Context,
        session: SessionArg = None,
    ) -> Annotated[CallToolResult, out.ExecuteOutput]:
        analysis, must_pass = await session_for(ctx, session)
        started = time.monotonic()
        timeout = settings.sandbox.code_timeout

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
                result = await analysis.execute(code)
            except AnalysisError as exc:
                # Raised after the group closes: raised inside it, it would reach the SDK as an
                # ExceptionGroup and the client would see only "Error executing tool execute_code".
                failure = exc
            finally:
                tg.cancel_scope.cancel()
        if failure is not None:
            raise failure
        index = analysis.state.execution_counter
        model = out.ExecuteOutput(session=analysis.id, execution=index, **result.model_dump(exclude={"output_chars"}))
        model, text = out.execution_result(
            model, execution_uri(analysis.id, index), out.session_note(analysis.id, must_pass), budget
        )
        return out.result(model, text, budget)

    @tool(ToolAnnotations(read_only_hint=False, idempotent_hint=True, destructive_hint=False))
    async def cite(
        chunk_ids: Annotated[
            list[str],
            Field(description="chunk_id values supporting the answer; [] if the answer is not from the documents."),
        ],
        ctx: Context,
        session: SessionArg = None,
    ) -> Annotated[CallToolResult, out.CiteOutput]:
        """Register the chunk_ids your answer rests on (cite([]) if it is not from the documents). Returns one
        line per citation: title, section, pages, uri. Near-miss ids are repaired, unknown ones listed.
        Example: cite(chunk_ids=["6b0a642e-247b-42f3-8dd8-1ecdb767fff8"])"""
        analysis, must_pass = await session_for(ctx, session)
        outcome = await analysis.cite(chunk_ids)
        model = out.CiteOutput(
            session=analysis.id,
            citations=[out.CitationOut.of(c) for c in outcome.citations],
            repaired={label(given, 60): fixed for given, fixed in outcome.repaired.items()},
            ignored=[label(given, 60) for given in outcome.ignored],
            no_evidence=outcome.no_evidence,
            total_cited=len(analysis.state.citations),
        )
        model, text = out.cite_result(model, state_uri(analysis.id), out.session_note(analysis.id, must_pass), budget)
        return out.result(model, text, budget)

    @tool(ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False))
    async def new_analysis(
        ctx: Context, session: SessionArg = None
    ) -> Annotated[CallToolResult, out.NewAnalysisOutput]:
        """Start a new analysis for an unrelated question: clears variables, executions, searches and
        citations (keeps the citation index and the filter). Example: new_analysis()"""
        analysis, must_pass = await session_for(ctx, session)
        await analysis.new_analysis()
        model = out.NewAnalysisOutput(
            session=analysis.id,
            analysis_number=analysis.state.analysis_number,
            message="New analysis started: the interpreter is empty and no citations are registered.",
        )
        text = model.message + out.session_note(analysis.id, must_pass)
        return out.result(model, text, budget)

    @tool(read_only)
    async def analysis_state(ctx: Context, session: SessionArg = None) -> Annotated[CallToolResult, out.StateOutput]:
        """This session in brief: one line per execution, the searches, one line per citation, and the
        resource holding the full state (every program and its output). Example: analysis_state()"""
        analysis, must_pass = await session_for(ctx, session)
        model, text = out.state_result(_state_model(analysis), out.session_note(analysis.id, must_pass), budget)
        return out.result(model, text, budget)

    # -------------------------------------------------------------- resources

    async def _corpus(ctx: Context) -> Any:
        runtime = await server.runtime.ready()
        assert runtime.kb is not None
        _, document_filter = caller_filter(runtime)
        return runtime.kb.corpus(document_filter)

    @_user_errors(ResourceError)
    async def _doc_file(document_id: str, name: str, ctx: Context) -> str:
        from mcp_analysis.sandbox.vfs import DocumentsFS

        corpus = await _corpus(ctx)
        meta = await corpus.find(document_id)
        if meta is None:
            raise ResourceNotFoundError(f"No document {label(document_id)!r} (unknown, or outside your filter).")
        return await DocumentsFS(corpus).render(meta, name)

    def register_doc_resource(name: str, mime: str, description: str) -> None:
        async def read(document_id: str, ctx: Context) -> str:
            return await _doc_file(document_id, name, ctx)

        server.resource(
            f"documents:///{{document_id}}/{name}",
            name=f"document-{name.replace('.', '-')}",
            title=f"Document {name}",
            description=description,
            mime_type=mime,
        )(read)

    register_doc_resource("metadata.json", "application/json", "A document's id, title, uri, created_at and metadata.")
    register_doc_resource("content.txt", "text/plain", "A document's full text (markdown, tables as markdown).")
    register_doc_resource(
        "items.jsonl", "application/jsonl", "A document's items (one JSON object per line, with self_ref and label)."
    )
    register_doc_resource("toc.json", "application/json", "A document's section tree with item ranges and chunk ids.")

    @_user_errors(ResourceError)
    async def _session_by_id(session_id: str) -> AnalysisSession:
        runtime = await server.runtime.ready()
        assert runtime.sessions is not None
        owner, document_filter = caller_filter(runtime)
        try:
            return await runtime.sessions.resolve(session_id, owner=owner, document_filter=document_filter, fresh=False)
        except AnalysisError as exc:
            raise ResourceNotFoundError(str(exc)) from None

    @server.resource(
        "analysis://sessions/{session_id}/state",
        name="analysis-state",
        title="Analysis session state",
        description="Executions (code and output), searches and citations of an analysis session.",
        mime_type="application/json",
    )
    async def session_state(session_id: str, ctx: Context) -> str:
        analysis = await _session_by_id(session_id)
        state = analysis.state.model_dump(mode="json")
        state["session"] = analysis.id
        return json.dumps(state, ensure_ascii=False, indent=2)

    @server.resource(
        "analysis://sessions/{session_id}/executions/{index}",
        name="analysis-execution",
        title="One execute_code call",
        description="The code of one execution and its full, untruncated output.",
        mime_type="application/json",
    )
    async def session_execution(session_id: str, index: str, ctx: Context) -> str:
        analysis = await _session_by_id(session_id)
        for entry in analysis.state.executions:
            if str(entry.index) == index:
                return entry.model_dump_json(indent=2)
        missing = label(index, 20)  # as given: it may be anything
        raise ResourceNotFoundError(f"Session {analysis.id} has no execution {missing} in its current analysis.")

    # ------------------------------------------------------------- prompts etc.

    @server.prompt(name="analyze", title="Analyse a question", description="The analysis workflow for a question.")
    def analyze(question: Annotated[str, Field(description="The question to answer.")]) -> str:
        return ANALYZE_PROMPT.format(question=question)

    @server.completion()
    @_user_errors(_protocol_error)
    async def complete(ref: Any, argument: Any, context: Any) -> Completion | None:
        if not isinstance(ref, ResourceTemplateReference) or argument.name != "document_id":
            return None
        runtime = await server.runtime.ready()
        assert runtime.kb is not None
        _, document_filter = caller_filter(runtime)
        prefix = (argument.value or "").lower()
        documents = await runtime.kb.corpus(document_filter).documents()
        matches = [d.id for d in documents if d.id.startswith(prefix)]
        matches += [d.id for d in documents if prefix and prefix in d.title.lower() and d.id not in matches]
        return Completion(values=matches[:100], total=len(matches), has_more=len(matches) > 100)

    return server


def _state_model(analysis: AnalysisSession) -> out.StateOutput:
    state = analysis.state
    return out.StateOutput(
        session=analysis.id,
        document_filter=state.document_filter,
        analysis_number=state.analysis_number,
        executions_total=len(state.executions),
        executions=[
            out.ExecutionSummary(
                index=e.index, success=e.success, duration_ms=round(e.duration_ms, 1), code=out.first_line(e.code)
            )
            for e in state.executions
        ],
        searches_total=len(state.searches),
        searches=[label(q) for q in state.searches],
        citations_total=len(state.citations),
        citations=[out.CitationOut.of(state.citation_index[c]) for c in state.citations if c in state.citation_index],
        citation_index_size=len(state.citation_index),
        resource=state_uri(analysis.id),
        execution_resource=execution_uri(analysis.id, "{n}"),
    )
