"""The `mcp-analysis` application: global options, the commands in the order `--help` lists them, `main`."""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from mcp_analysis.cli.documents import add, info, list_documents, rm
from mcp_analysis.cli.errors import fail
from mcp_analysis.cli.options import CONFIG_HELP, DB_HELP, LOG_LEVELS, LogLevelOption, Options, SampleOption
from mcp_analysis.cli.query import analyze, exec_code, search
from mcp_analysis.cli.serve import serve
from mcp_analysis.cli.watching import sync
from mcp_analysis.logging_setup import configure_logging

app = typer.Typer(
    name="mcp-analysis",
    help="Analyse a document knowledge base: an MCP server with hybrid search, a sandboxed Python "
    "interpreter over the documents, and citations.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
_debug = False  # --debug, for errors that escape before or outside a command (see main)


@app.callback()
def main_options(
    ctx: typer.Context,
    config: Annotated[Path | None, typer.Option("--config", "-c", help=CONFIG_HELP)] = None,
    db: Annotated[str | None, typer.Option("--db", help=DB_HELP)] = None,
    sample: SampleOption = False,
    log_level: LogLevelOption = None,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks on errors.")] = False,
) -> None:
    if log_level and log_level.upper() not in LOG_LEVELS:
        raise typer.BadParameter(f"use one of {', '.join(LOG_LEVELS)}", param_hint="--log-level")
    global _debug
    _debug = debug
    configure_logging(log_level or ("DEBUG" if debug else "WARNING"))
    ctx.obj = Options(config, db, sample, debug, log_level)


app.command()(serve)
app.command()(add)
app.command()(rm)
app.command("delete", hidden=True)(rm)  # haiku.rag's name for it
app.command()(sync)
app.command("list")(list_documents)
app.command()(search)
app.command()(info)
app.command("exec")(exec_code)
app.command()(analyze)
app.command("ask", hidden=True)(analyze)  # haiku.rag's name for it


def main() -> None:
    """The `mcp-analysis` command; whatever escapes a command still ends as one line on stderr."""
    logging.captureWarnings(True)
    code: int | str | None = 0
    try:
        app()
    except SystemExit as done:
        code = done.code
    except (Exception, KeyboardInterrupt) as exc:
        code = fail(exc, _debug).exit_code
    _end(code)


def _end(code: int | str | None) -> None:
    """End the process once the command is done: the exit functions run (ours, logging's, pyarrow's),
    then the process ends without the native libraries' own teardown. Under load, a finished `exec`
    was sometimes aborted in that teardown (SIGABRT, no Python frame, after its output was written),
    its success turned into -6."""
    if isinstance(code, str):
        sys.stderr.write(code + "\n")
        code = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code or 0)
