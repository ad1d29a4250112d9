"""Every failure of a command ends as one line on stderr and an exit code (1; 130 on Ctrl-C)."""

from __future__ import annotations

from typing import Any

import anyio
import typer

from mcp_analysis.cli.output import err, escape
from mcp_analysis.errors import AnalysisError

DEBUG_HINT = "run with --debug for the traceback"


def one_line(text: str, limit: int = 600) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def innermost(exc: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups, e.g. from a task group."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def error_line(exc: BaseException) -> str:
    """One line for stderr: a user error's own message, else the unexpected error and the --debug hint."""
    exc = innermost(exc)
    if isinstance(exc, AnalysisError):
        # Our own messages end with what to do; a long path in front must not cut that off.
        return one_line(str(exc), limit=2000)
    detail = one_line(str(exc)) or "(no message)"
    return f"unexpected {type(exc).__name__}: {detail} ({DEBUG_HINT})"


def fail(exc: BaseException, debug: bool) -> typer.Exit:
    """Print `exc` as one line on stderr; the caller raises the returned exit (code 1, 130 on Ctrl-C)."""
    if isinstance(innermost(exc), KeyboardInterrupt):
        return typer.Exit(130)
    if debug:
        raise exc
    err.print(f"[red]error:[/red] {escape(error_line(exc))}", highlight=False)
    return typer.Exit(1)


def run_async(debug: bool, func: Any, *args: Any) -> Any:
    """Run an async command; any error becomes one line on stderr and a non-zero exit."""
    try:
        return anyio.run(func, *args)
    except (Exception, KeyboardInterrupt) as exc:
        raise fail(exc, debug) from None
