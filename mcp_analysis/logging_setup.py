"""Logging that never touches stdout (over stdio, stdout is the MCP wire), and never prints a
credential: every URL in a line or a traceback is shown with its secrets masked (redact.py)."""

from __future__ import annotations

import logging
import sys
from typing import Any

from mcp_analysis.redact import redact_urls_in
from mcp_analysis.text import escape_controls

PROGRESS_LOGGER = "mcp_analysis.progress"  # see mcp_analysis/progress.py
#: `log.info(..., extra=TO_HOST)`: the line is for the person at the MCP host too (server/host_log.py).
#: Such a line names files and settings, never document text or a secret.
TO_HOST = {"to_host": True}


def to_host_without_names(summary: str) -> dict[str, object]:
    """`extra` for a line naming files: `summary` (no names) is what a host is sent instead when
    callers may have document filters (a file outside a caller's filter is never named to it)."""
    return {**TO_HOST, "host_summary": summary}


_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"


class RedactingFormatter(logging.Formatter):
    """Formats as usual, then masks the credentials of every URL in the text (tracebacks included).
    The values put into a message (a file name, a reason) have their line breaks and control
    characters shown as `\\x0a`: a file named with a newline cannot forge a line of the log."""

    def format(self, record: logging.LogRecord) -> str:
        if record.args:
            record = logging.makeLogRecord(record.__dict__)  # a copy: other handlers get the original
            record.args = _shown(record.args)
        return redact_urls_in(super().format(record))


def _shown(args: Any) -> Any:
    if isinstance(args, dict):
        return {key: _shown_value(value) for key, value in args.items()}
    return tuple(_shown_value(value) for value in args)


def _shown_value(value: Any) -> Any:
    if not isinstance(value, str | BaseException | bytes) and not hasattr(value, "__fspath__"):
        return value  # a number keeps its %d
    return escape_controls(str(value), newlines=True)


# Whose records keep their tracebacks: ours, and the serving stack's (an error there is the server's
# own failure, which its operator must be able to diagnose without a restart under --debug).
_WHOLE = ("mcp_analysis", "mcp", "uvicorn", "starlette", "sse_starlette", "anyio", "asyncio")


class OneLineFromLibraries(logging.Filter):
    """A parser library's record in one line, without its traceback: the failure it is about reaches
    the user as our own one-line message (a skipped file); `--debug` shows it whole."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name.split(".", 1)[0] in _WHOLE:
            return True
        record.exc_info = record.exc_text = record.stack_info = None
        message = record.getMessage()
        if "\n" in message:
            record.msg, record.args = message.split("\n", 1)[0].rstrip(" :") + " (details with --debug)", None
        return True


def configure_logging(level: str = "INFO") -> None:
    """Send all logging to stderr at `level`; quieten chatty third-party loggers."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(RedactingFormatter(_FORMAT, datefmt="%H:%M:%S"))
    if level.upper() != "DEBUG":
        handler.addFilter(OneLineFromLibraries())
    root.addHandler(handler)
    root.setLevel(level.upper())
    # Chatty libraries: warnings at most (never below the level asked for: ERROR means errors only).
    quiet = max(logging.WARNING, root.level) if level.upper() != "DEBUG" else logging.INFO
    # Progress of slow first-use steps: plain lines, shown unless logging asks for errors only.
    progress = logging.getLogger(PROGRESS_LOGGER)
    for handler in list(progress.handlers):
        progress.removeHandler(handler)
    plain = logging.StreamHandler(sys.stderr)
    plain.setFormatter(RedactingFormatter("mcp-analysis: %(message)s"))
    progress.addHandler(plain)
    progress.propagate = False
    progress.setLevel(min(logging.INFO, root.level) if root.level <= logging.WARNING else root.level)
    for name in (
        "httpx",
        "httpx2",
        "httpcore",
        "httpcore2",
        "uvicorn.access",
        "docling",
        "docling_core",
        "lance",
    ):
        logging.getLogger(name).setLevel(quiet)
