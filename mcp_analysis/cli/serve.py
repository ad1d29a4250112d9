"""`mcp-analysis serve`: the MCP server over stdio (default) or streamable HTTP.

With `--sample`, the server starts answering before the sample knowledge base is
built: the build runs in the background as the runtime's way of opening the
knowledge base, and tool calls wait for it. A first start (20-60 s of building)
so survives an MCP host's connect timeout (the MCP Inspector's is 15 s).
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Annotated, Any

import typer

from mcp_analysis.cli.errors import fail
from mcp_analysis.cli.options import ConfigOption, DbOption, FilterOption, LogLevelOption, SampleOption, command_options
from mcp_analysis.cli.watching import WatchOption, serve_watching, watch_arguments
from mcp_analysis.errors import AnalysisError
from mcp_analysis.logging_setup import configure_logging
from mcp_analysis.process_gc import imports_paused, own_process


def serve(
    ctx: typer.Context,
    http: Annotated[bool, typer.Option("--http", help="Serve streamable HTTP instead of stdio.")] = False,
    stdio: Annotated[bool, typer.Option("--stdio", help="Serve over stdio (the default).")] = False,
    mcp: Annotated[bool, typer.Option("--mcp", hidden=True, help="haiku.rag's flag: with --stdio or --http.")] = False,
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
    watch: WatchOption = None,
    sample: SampleOption = False,
    log_level: LogLevelOption = None,
    db: DbOption = None,
    config: ConfigOption = None,
) -> None:
    """Run the MCP server (stdio by default) on the knowledge base; --watch DIR keeps folders in sync."""
    _transport(http=http, stdio=stdio, mcp=mcp)
    options = command_options(ctx, sample, db, config)
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
        raise fail(exc, options.debug) from None
    configure_logging("DEBUG" if options.debug else settings.server.log_level)  # --debug: tracebacks too
    folders = watch_arguments(watch, settings)
    if folders and options.sample:
        raise fail(AnalysisError("--watch writes to the knowledge base; use --db, not --sample."), options.debug)
    own_process()
    with imports_paused("server"):
        import mcp_analysis.server.app  # noqa: F401  the MCP SDK and our tools
        from mcp_analysis.server.runner import run_server
    if folders:  # the folder watcher runs beside the server, in this process
        options.run(partial(serve_watching, settings, folders, http=http))
        return
    opener = None
    if options.sample:
        from mcp_analysis.sample import SampleOpener

        opener = SampleOpener()
    options.run(partial(run_server, settings, http=http, opener=opener))


def _transport(*, http: bool, stdio: bool, mcp: bool) -> None:
    """haiku.rag's `serve --mcp --stdio` (what its users put in a host's config) serves stdio here too;
    its `serve --mcp` alone meant HTTP on its port, so here it is refused with the command to use."""
    if http and stdio:
        raise typer.BadParameter("--http and --stdio are two transports: give one (stdio is the default)")
    if mcp and not (http or stdio):
        raise typer.BadParameter(
            "mcp-analysis serve is always an MCP server, over stdio by default: drop --mcp "
            "(haiku.rag's `serve --mcp` served HTTP: here that is `serve --http`, port 8765 by default)",
            param_hint="--mcp",
        )
