"""Command line: ``mcp-analysis serve | add | rm | list | search | info | exec | analyze``.

Errors are one line on stderr and a non-zero exit (``--debug`` shows tracebacks).
Human output goes to the terminal; ``--json`` prints machine-readable results.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import anyio
import typer
from rich.console import Console
from rich.markup import escape

from mcp_analysis.config import Settings, load_settings
from mcp_analysis.errors import AnalysisError
from mcp_analysis.logging_setup import configure_logging

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")

app = typer.Typer(
    name="mcp-analysis",
    help="Analyse a document knowledge base: an MCP server with hybrid search, a sandboxed Python "
    "interpreter over the documents, and citations.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)


@dataclass
class Options:
    config: Path | None
    db: str | None  # text, not Path: Path("s3://b/kb") would mangle a URI into "s3:/b/kb"
    sample: bool
    debug: bool
    log_level: str | None

    def settings(self, **overrides: Any) -> Settings:
        db = self.db
        if self.sample and db is None:
            from mcp_analysis.sample import default_sample_db

            db = str(default_sample_db())
        return load_settings(self.config, db=db, **overrides)


FilterOption = Annotated[
    str | None, typer.Option("--filter", help="SQL WHERE over document metadata, e.g. \"uri LIKE '%report%'\".")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]
SampleOption = Annotated[
    bool, typer.Option("--sample", help="Use the built-in sample knowledge base (built on first use).")
]


def _options(ctx: typer.Context, sample: bool = False) -> Options:
    """The global options; `--sample` may also be given after the command name."""
    options: Options = ctx.obj
    if sample:
        options.sample = True
    return options


@app.callback()
def main_options(
    ctx: typer.Context,
    config: Annotated[
        Path | None, typer.Option("--config", "-c", help="YAML config file (default ./mcp-analysis.yaml).")
    ] = None,
    db: Annotated[
        str | None,
        typer.Option("--db", help="Knowledge base path or s3://BUCKET/PREFIX (or MCP_ANALYSIS_DB / HAIKU_RAG_DB)."),
    ] = None,
    sample: Annotated[
        bool, typer.Option("--sample", help="Use the built-in sample knowledge base (built on first use).")
    ] = False,
    log_level: Annotated[str | None, typer.Option("--log-level", help="DEBUG, INFO, WARNING or ERROR.")] = None,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks on errors.")] = False,
) -> None:
    if log_level and log_level.upper() not in LOG_LEVELS:
        raise typer.BadParameter(f"use one of {', '.join(LOG_LEVELS)}", param_hint="--log-level")
    global _debug
    _debug = debug
    configure_logging(log_level or ("DEBUG" if debug else "WARNING"))
    ctx.obj = Options(config, db, sample, debug, log_level)


_DEBUG_HINT = "run with --debug for the traceback"
_debug = False  # --debug, for errors that escape before or outside a command (see main)


def _one_line(text: str, limit: int = 600) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _innermost(exc: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups, e.g. from a task group."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _error_line(exc: BaseException) -> str:
    """One line for stderr: a user error's own message, else the unexpected error and the --debug hint."""
    exc = _innermost(exc)
    if isinstance(exc, AnalysisError):
        return _one_line(str(exc))
    detail = _one_line(str(exc)) or "(no message)"
    return f"unexpected {type(exc).__name__}: {detail} ({_DEBUG_HINT})"


def _fail(exc: BaseException, debug: bool) -> typer.Exit:
    """Print `exc` as one line on stderr; the caller raises the returned exit (code 1, 130 on Ctrl-C)."""
    if isinstance(_innermost(exc), KeyboardInterrupt):
        return typer.Exit(130)
    if debug:
        raise exc
    err.print(f"[red]error:[/red] {escape(_error_line(exc))}", highlight=False)
    return typer.Exit(1)


def _run(options: Options, func: Any, *args: Any) -> Any:
    """Run an async command; any error becomes one line on stderr and a non-zero exit."""
    try:
        return anyio.run(func, *args)
    except (Exception, KeyboardInterrupt) as exc:
        raise _fail(exc, options.debug) from None


async def _ensure_sample(options: Options, settings: Settings) -> None:
    if options.sample:
        from mcp_analysis.sample import ensure_sample_kb

        await ensure_sample_kb(settings)


@asynccontextmanager
async def _knowledge_base(options: Options) -> AsyncIterator[Any]:
    """The configured knowledge base (the sample one built first if --sample), closed after use."""
    settings = options.settings()
    await _ensure_sample(options, settings)
    from mcp_analysis.corpus import KnowledgeBase

    kb = await KnowledgeBase.open(settings)
    try:
        yield kb
    finally:
        await kb.close()


def _print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


# ---------------------------------------------------------------------------- serve


@app.command()
def serve(
    ctx: typer.Context,
    http: Annotated[bool, typer.Option("--http", help="Serve streamable HTTP instead of stdio.")] = False,
    host: Annotated[str | None, typer.Option(help="HTTP bind address (default 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(help="HTTP port (default 8765).")] = None,
    filter: FilterOption = None,
    tokens_file: Annotated[
        Path | None, typer.Option("--tokens-file", help="Bearer tokens (YAML) with per-token filters (HTTP).")
    ] = None,
    allowed_host: Annotated[
        list[str] | None, typer.Option("--allowed-host", help="Extra Host header to accept (repeatable).")
    ] = None,
    allowed_origin: Annotated[
        list[str] | None, typer.Option("--allowed-origin", help="Extra Origin header to accept (repeatable).")
    ] = None,
    sample: SampleOption = False,
    log_level: Annotated[str | None, typer.Option("--log-level", help="DEBUG, INFO, WARNING or ERROR.")] = None,
) -> None:
    """Run the MCP server (stdio by default) on the knowledge base."""
    options = _options(ctx, sample)
    if log_level:
        options.log_level = log_level
    server: dict[str, Any] = {}
    for key, value in (
        ("host", host),
        ("port", port),
        ("filter", filter),
        ("tokens_file", tokens_file),
        ("allowed_hosts", allowed_host or None),
        ("allowed_origins", allowed_origin or None),
        ("log_level", options.log_level.upper() if options.log_level else None),
    ):
        if value is not None:
            server[key] = value
    try:
        settings = options.settings(server=server or None)
    except Exception as exc:
        raise _fail(exc, options.debug) from None
    configure_logging(settings.server.log_level)
    from mcp_analysis.server.runner import run_server

    async def go() -> None:
        await _ensure_sample(options, settings)
        await run_server(settings, http=http)

    _run(options, go)


# ------------------------------------------------------------------------------ add


class _RichProgress:
    """A progress bar on stderr for long ingests; silent when stderr is not a terminal."""

    def __init__(self) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.progress = Progress(
            TextColumn("[bold]Adding[/bold] {task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err,
            transient=True,
        )
        self.task: Any = None

    def start(self, total: int) -> None:
        self.progress.start()
        self.task = self.progress.add_task("", total=total)

    def advance(self, label: str) -> None:
        self.progress.update(self.task, advance=1, description=label[:40])

    def phase(self, label: str) -> None:
        self.progress.update(self.task, description=label[:40])

    def finish(self) -> None:
        self.progress.stop()


def _parse_meta(pairs: list[str] | None) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise AnalysisError(f"--meta expects key=value, got {pair!r}.")
        meta[key.strip()] = value
    return meta


@app.command()
def add(
    ctx: typer.Context,
    paths: Annotated[list[Path], typer.Argument(help="Files or directories (walked recursively).")],
    title: Annotated[str | None, typer.Option(help="Title for a single file.")] = None,
    meta: Annotated[list[str] | None, typer.Option("--meta", help="key=value metadata (repeatable).")] = None,
    as_json: JsonOption = False,
) -> None:
    """Add or update documents (.md .html .pdf .docx .txt, source files, text files without an extension).

    Keeps going past files it cannot read, names them, and then exits with code 1.
    """
    options = _options(ctx)

    async def go() -> int:
        from mcp_analysis.corpus import KnowledgeBase
        from mcp_analysis.ingest.pipeline import Ingestor

        metadata = _parse_meta(meta)
        settings = options.settings()
        kb = await KnowledgeBase.open(settings, create=True)
        progress = _RichProgress() if err.is_terminal and not as_json else None
        try:
            report = await Ingestor(kb, progress).add(paths, title=title, metadata=metadata)
        finally:
            await kb.close()
        failed = 1 if report.skipped else 0
        if as_json:
            _print_json(report.__dict__)
            return failed
        for path, reason in report.skipped:
            err.print(f"[yellow]skipped[/yellow] {escape(path)}: {escape(reason)}", highlight=False)
        out.print(f"{report.summary()} -> {escape(str(settings.db))}", highlight=False)
        if failed:
            err.print(f"[red]error:[/red] {len(report.skipped)} path(s) could not be added (listed above).")
        return failed

    raise typer.Exit(_run(options, go))


@app.command()
def rm(
    ctx: typer.Context,
    document: Annotated[
        str,
        typer.Argument(
            help="Document id (or a unique prefix of it, as `list` shows), uri, or the path it was added from."
        ),
    ],
) -> None:
    """Remove a document."""
    options = _options(ctx)

    async def go() -> None:
        from mcp_analysis.ingest.pipeline import remove_document
        from mcp_analysis.sample import forget_build

        async with _knowledge_base(options) as kb:
            meta = await remove_document(kb, document)
        forget_build(kb.settings.db)  # if this was the sample, the next --sample restores it
        out.print(f"removed {meta.id} ({escape(meta.title)})", highlight=False)

    _run(options, go)


# ----------------------------------------------------------------------- read paths


@app.command("list")
def list_documents(
    ctx: typer.Context,
    filter: FilterOption = None,
    as_json: JsonOption = False,
    sample: SampleOption = False,
) -> None:
    """List documents."""
    options = _options(ctx, sample)

    async def go() -> None:
        async with _knowledge_base(options) as kb:
            docs = await (await kb.open_corpus(filter)).documents()
        if as_json:
            _print_json([d.model_dump() for d in docs])
            return
        from rich.table import Table

        from mcp_analysis.search.excerpt import shared_dir

        short = _short_ids([d.id for d in docs])
        prefix = shared_dir([d.uri for d in docs])  # said once: a narrow column then shows what differs
        table = Table(show_lines=False)
        table.add_column("id", no_wrap=True, min_width=max((len(i) for i in short.values()), default=2))
        table.add_column("title")
        table.add_column("uri", overflow="fold")
        table.add_column("created", no_wrap=True)
        for d in docs:
            table.add_row(short[d.id], escape(d.title), escape(d.uri[len(prefix) :]), d.created_at[:10])
        out.print(table)
        if prefix:
            out.print(f"uri after {escape(prefix)}", highlight=False, soft_wrap=False)  # folded, not cut
        out.print(f"{len(docs)} document(s); ids: shortest unique prefix (--json: whole)", highlight=False)

    _run(options, go)


def _short_ids(ids: list[str], minimum: int = 8) -> dict[str, str]:
    """Each id shortened to its shortest unique prefix of at least `minimum` characters (like git)."""
    ordered = sorted(ids)
    short = {}
    for i, full in enumerate(ordered):
        length = minimum
        for neighbour in ordered[max(0, i - 1) : i] + ordered[i + 1 : i + 2]:
            common = next((k for k, (a, b) in enumerate(zip(full, neighbour, strict=False)) if a != b), len(full))
            length = max(length, common + 1)
        short[full] = full[:length]
    return short


@app.command()
def search(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="What to look for.")],
    limit: Annotated[int | None, typer.Option("--limit", "-n", help="Number of results (default 5).")] = None,
    context: Annotated[
        int | None,
        typer.Option(
            "--context", min=40, help="Characters of each hit's passage to show (default search.context_chars, 900)."
        ),
    ] = None,
    filter: FilterOption = None,
    as_json: JsonOption = False,
    sample: SampleOption = False,
) -> None:
    """Hybrid search (vector + full text) with context expansion: each hit's passage around the match.

    `--json` gives every hit whole (its grown section in `content`).
    """
    options = _options(ctx, sample)

    async def go() -> None:
        async with _knowledge_base(options) as kb:
            results = await (await kb.open_corpus(filter)).search(query, limit)
            chars = context or kb.settings.search.context_chars
        if as_json:
            _print_json([r.model_dump() for r in results])
            return
        if not results:
            out.print("no results")
        cut = False
        for r in results:
            pages = f" p.{','.join(map(str, r.page_numbers))}" if r.page_numbers else ""
            out.rule(escape(f"{r.rank}. {r.document_title}{pages}  score {r.score:.4f}"))
            out.print(f"[dim]{escape(r.document_uri)}  chunk {r.chunk_id}[/dim]")
            if r.headings:
                out.print(f"[bold]{escape(' > '.join(r.headings))}[/bold]")
            passage = r.excerpt(query, chars)
            cut = cut or len(passage) < len(r.content.strip())
            out.print(passage, markup=False, highlight=False)
        if cut:
            out.print(
                f"[dim](passages of up to {chars:,} characters around the match; --context {4 * chars} shows more, "
                "--json every passage whole)[/dim]",
                highlight=False,
            )

    _run(options, go)


@app.command()
def info(
    ctx: typer.Context,
    as_json: JsonOption = False,
    sample: SampleOption = False,
) -> None:
    """Counts, embedder, schema version and indexes of the knowledge base."""
    options = _options(ctx, sample)

    async def go() -> None:
        async with _knowledge_base(options) as kb:
            store = kb.store
            data = {
                "db": str(kb.settings.db),
                "documents": await kb.corpus().count(),
                "rows": await store.counts(),
                "embedder": store.settings.embedder if store.settings else kb.embedder_name,
                "vector_dim": store.settings.vector_dim if store.settings else None,
                "schema_version": store.settings.schema_version if store.settings else None,
                "created_at": store.settings.created_at if store.settings else None,
                "written_by": f"{store.settings.origin} {store.settings.origin_version}".strip()
                if store.settings
                else None,
                "read_only": store.read_only,
                "query_embedder": kb.embedder_name,
                "indexes": await store.index_names(),
            }
        if as_json:
            _print_json(data)
            return
        for key, value in data.items():
            out.print(f"[bold]{key}[/bold]: {escape(str(value))}", highlight=False)

    _run(options, go)


# ------------------------------------------------------------------------- exec


@app.command("exec")
def exec_code(
    ctx: typer.Context,
    code: Annotated[str | None, typer.Argument(help="Python code (or use -f).")] = None,
    file: Annotated[Path | None, typer.Option("--file", "-f", help="Read the code from a file ('-' = stdin).")] = None,
    filter: FilterOption = None,
    as_json: JsonOption = False,
    sample: SampleOption = False,
) -> None:
    """Run sandboxed Python against the knowledge base (the /documents tree, search, list_documents)."""
    options = _options(ctx, sample)
    if (code is None) == (file is None):
        err.print("[red]error:[/red] give CODE or --file (exactly one).")
        raise typer.Exit(2)
    try:
        source = code if code is not None else (sys.stdin.read() if str(file) == "-" else Path(file).read_text())  # type: ignore[arg-type]
    except (OSError, UnicodeDecodeError) as exc:
        raise _fail(AnalysisError(f"Cannot read the code file {file}: {exc}"), options.debug) from None

    async def go() -> int:
        from mcp_analysis.session.analysis import AnalysisSession

        async with _knowledge_base(options) as kb, AnalysisSession(kb, filter=filter) as session:
            result = await session.execute(source)
        if as_json:
            _print_json(result.model_dump())
        else:
            if result.stdout:
                sys.stdout.write(result.stdout)
            if result.stderr:
                sys.stderr.write(result.stderr)
            if result.value is not None:
                sys.stdout.write(result.value + "\n")
            if result.error:
                err.print(result.error, markup=False, highlight=False)
        return 0 if result.success else 1

    code_ = _run(options, go)
    raise typer.Exit(code_)


# ---------------------------------------------------------------------- analyze


@app.command()
def analyze(
    ctx: typer.Context,
    question: Annotated[str, typer.Argument(help="The question to answer from the knowledge base.")],
    filter: FilterOption = None,
    model: Annotated[str | None, typer.Option("--model", help="pydantic-ai model (overrides analysis.model).")] = None,
    show_code: Annotated[bool, typer.Option("--show-code", help="Also print the programs that were run.")] = False,
    as_json: JsonOption = False,
    sample: SampleOption = False,
) -> None:
    """Answer a question with the built-in analysis agent (needs an LLM; see README)."""
    options = _options(ctx, sample)

    async def go() -> None:
        from mcp_analysis.agent.client import AnalysisClient

        settings = options.settings(analysis={"model": model} if model else None)
        await _ensure_sample(options, settings)
        async with AnalysisClient(settings=settings) as client:
            if err.is_terminal and not as_json:
                with err.status("Analysing..."):
                    result = await client.analyze(question, filter=filter)
            else:
                result = await client.analyze(question, filter=filter)
            executions = list(client.last_state.executions) if client.last_state else []
        if as_json:
            data = result.model_dump()
            if show_code:
                data["executions"] = [e.model_dump() for e in executions]
            _print_json(data)
            return
        out.print(result.answer, markup=False, highlight=False)
        if result.citations:
            out.rule("Citations")
            for c in result.citations:
                pages = f" (p. {', '.join(map(str, c.page_numbers))})" if c.page_numbers else ""
                out.print(f"- {c.document_title}{pages} — {c.document_uri}", highlight=False, markup=False)
        if show_code:
            for e in executions:
                out.rule(f"Program {e.index} ({'ok' if e.success else 'failed'})")
                out.print(e.code, markup=False, highlight=False)

    _run(options, go)


def main() -> None:
    """The `mcp-analysis` command; whatever escapes a command still ends as one line on stderr."""
    logging.captureWarnings(True)
    try:
        app()
    except (Exception, KeyboardInterrupt) as exc:
        code = _fail(exc, _debug).exit_code
        sys.exit(code)


if __name__ == "__main__":
    main()
