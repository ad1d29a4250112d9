"""The commands that ask the knowledge base: `search`, `exec` (sandboxed code) and `analyze` (the agent)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from mcp_analysis.cli.charts import ChartsOption, save_charts
from mcp_analysis.cli.errors import fail
from mcp_analysis.cli.options import (
    ConfigOption,
    DbOption,
    FilterOption,
    JsonOption,
    SampleOption,
    command_options,
    ensure_sample,
    knowledge_base,
)
from mcp_analysis.cli.output import err, escape_line, for_stream, out, print_json
from mcp_analysis.errors import AnalysisError

if TYPE_CHECKING:
    from mcp_analysis.search.models import SearchResult


def search(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="What to look for.")],
    limit: Annotated[int | None, typer.Option("--limit", "-n", help="Number of results (default 5).")] = None,
    context: Annotated[
        int | None,
        typer.Option(
            "--context",
            min=40,
            help="Characters of each hit's passage to show, on average (default search.context_chars, 900).",
        ),
    ] = None,
    filter: FilterOption = None,
    as_json: JsonOption = False,
    sample: SampleOption = False,
    db: DbOption = None,
    config: ConfigOption = None,
) -> None:
    """Hybrid search (vector + full text) with context expansion: each hit's passage around the match.

    `--json` gives every hit whole (its grown section in `content`).
    """
    options = command_options(ctx, sample, db, config)

    async def go() -> None:
        async with knowledge_base(options) as kb:
            results = await (await kb.open_corpus(filter)).search(query, limit)
            chars = context or kb.settings.search.context_chars
        if as_json:
            print_json([r.model_dump() for r in results])
            return
        print_hits(results, query, chars)

    options.run(go)


def print_hits(results: list[SearchResult], query: str, chars: int) -> None:
    """Each hit as a rule with its title, then the passage around the match: `chars` characters
    each on average, shared as the `search` tool shares them (search/budget.py)."""
    from mcp_analysis.search.models import SearchHit

    if not results:
        out.print("no results")
    cut = False
    for r, hit in zip(results, SearchHit.all_of(results, query, chars), strict=True):
        pages = f" p.{','.join(map(str, r.page_numbers))}" if r.page_numbers else ""
        out.rule(escape_line(f"{r.rank}. {r.document_title}{pages}  score {r.score:.4f}"))
        out.print(f"[dim]{escape_line(r.document_uri)}  chunk {r.chunk_id}[/dim]")
        if r.headings:
            out.print(f"[bold]{escape_line(' > '.join(r.headings))}[/bold]")
        cut = cut or len(hit.content) < hit.full_chars
        out.print(hit.content, markup=False, highlight=False)
    if cut:
        out.print(
            f"[dim](passages of {chars:,} characters on average around the match; --context {4 * chars} shows more, "
            "--json every passage whole)[/dim]",
            highlight=False,
        )


def exec_code(
    ctx: typer.Context,
    code: Annotated[str | None, typer.Argument(help="Python code (or use -f).")] = None,
    file: Annotated[Path | None, typer.Option("--file", "-f", help="Read the code from a file ('-' = stdin).")] = None,
    filter: FilterOption = None,
    charts: ChartsOption = None,
    as_json: JsonOption = False,
    sample: SampleOption = False,
    db: DbOption = None,
    config: ConfigOption = None,
) -> None:
    """Run sandboxed Python against the knowledge base (the /documents tree, search, list_documents, chart)."""
    options = command_options(ctx, sample, db, config)
    if (code is None) == (file is None):
        err.print("[red]error:[/red] give CODE or --file (exactly one).")
        raise typer.Exit(2)
    try:
        source = code if code is not None else (sys.stdin.read() if str(file) == "-" else Path(file).read_text())  # type: ignore[arg-type]
    except (OSError, UnicodeDecodeError) as exc:
        raise fail(AnalysisError(f"Cannot read the code file {file}: {exc}"), options.debug) from None

    async def go() -> int:
        from mcp_analysis.session.analysis import AnalysisSession

        async with knowledge_base(options) as kb, AnalysisSession(kb, filter=filter) as session:
            result = await session.execute(source)
        drawn = save_charts(result.charts, charts)
        if as_json:
            print_json(result.model_dump() | ({"charts": drawn} if drawn else {}))
        else:
            if result.stdout:
                sys.stdout.write(for_stream(result.stdout, sys.stdout))
            if result.stderr:
                sys.stderr.write(for_stream(result.stderr, sys.stderr))
            if result.value is not None:
                sys.stdout.write(for_stream(result.value + "\n", sys.stdout))
            if result.error:
                err.print(result.error, markup=False, highlight=False)
        return 0 if result.success else 1

    raise typer.Exit(options.run(go))


def analyze(
    ctx: typer.Context,
    question: Annotated[str, typer.Argument(help="The question to answer from the knowledge base.")],
    filter: FilterOption = None,
    model: Annotated[str | None, typer.Option("--model", help="pydantic-ai model (overrides analysis.model).")] = None,
    show_code: Annotated[bool, typer.Option("--show-code", help="Also print the programs that were run.")] = False,
    charts: ChartsOption = None,
    as_json: JsonOption = False,
    sample: SampleOption = False,
    db: DbOption = None,
    config: ConfigOption = None,
) -> None:
    """Answer a question with the built-in analysis agent (needs an LLM; see README)."""
    options = command_options(ctx, sample, db, config)

    async def go() -> None:
        from mcp_analysis.agent.client import AnalysisClient

        settings = options.settings(analysis={"model": model} if model else None)
        await ensure_sample(options, settings)
        async with AnalysisClient(settings=settings) as client:
            if err.is_terminal and not as_json:
                with err.status("Analysing..."):
                    result = await client.analyze(question, filter=filter)
            else:
                result = await client.analyze(question, filter=filter)
            executions = list(client.last_state.executions) if client.last_state else []
        drawn = save_charts(result.charts, charts)
        if as_json:
            data = result.model_dump(exclude={"charts"}) | ({"charts": drawn} if drawn else {})
            if show_code:
                data["executions"] = [e.model_dump() for e in executions]
            print_json(data)
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

    options.run(go)
