"""What a person at the MCP host sees in its log pane: `notifications/message`, at each client's level.

Two sources, both written for people (a file name, counts, a setting's name; never document
text, never a secret — URLs are masked as in the server's own log, redact.py):

- a tool call that failed: `warn_failed_calls` sends a warning carrying the message the result
  carries, on that request's own stream;
- server events logged with ``extra=TO_HOST`` (a watched folder's changes, a session dropped for
  capacity, a worker restarted) and the progress lines of slow first-use steps (the sample being
  built): `HostLog`, a logging handler while the runtime runs, sends them to every handshake-era
  connection on its standalone stream (stdio's pipe, legacy HTTP's GET stream).

A handshake-era client chooses its level with ``logging/setLevel`` (kept on its connection; `info`
until it asks). On 2026-07-28 each request opts in with ``io.modelcontextprotocol/logLevel`` in its
``_meta`` and the spec allows ``notifications/message`` only on that request's stream: such clients
get the warnings of their failed calls, and no server events. Each connection may be sent
`server.host_log_per_minute` messages a minute; the next one after a pause says how many were left out.
"""

from __future__ import annotations

import asyncio
import logging
import time
import warnings
from collections import deque
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from typing import Any, get_args

from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp_types import EmptyResult, LoggingLevel, SetLevelRequestParams
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel

from mcp_analysis.logging_setup import PROGRESS_LOGGER
from mcp_analysis.redact import redact_urls_in
from mcp_analysis.server.sdk_compat import connection_of, log_levels_asked
from mcp_analysis.text import clip

#: The `logger` field of every message this server sends.
LOGGER = "mcp-analysis"
LEVELS: tuple[LoggingLevel, ...] = get_args(LoggingLevel)  # severity ascending (RFC 5424)
DEFAULT_LEVEL: LoggingLevel = "info"
MESSAGE_CHARS = 2000  # a longer message keeps its head and tail
_LEVEL_KEY = "mcp_analysis.log_level"
_BUDGET_KEY = "mcp_analysis.log_budget"
_PENDING = 200  # server events waiting to be sent; older ones go first when more arrive
_BY_NUMBER = {
    logging.DEBUG: "debug",
    logging.INFO: "info",
    logging.WARNING: "warning",
    logging.ERROR: "error",
    logging.CRITICAL: "critical",
}


class Budget:
    """At most `per_minute` messages in any minute; counts what it refused until one is allowed."""

    def __init__(self, per_minute: int) -> None:
        self.per_minute = per_minute
        self.sent: deque[float] = deque()
        self.left_out = 0

    def allow(self) -> int | None:
        """None when refused; else how many were left out before this one (then reset)."""
        now = time.monotonic()
        while self.sent and now - self.sent[0] >= 60:
            self.sent.popleft()
        if len(self.sent) >= self.per_minute:
            self.left_out += 1
            return None
        self.sent.append(now)
        left_out, self.left_out = self.left_out, 0
        return left_out


def wanted(connection: Connection, level: LoggingLevel) -> bool:
    """Whether `connection`'s client asked for messages of `level` (`logging/setLevel`, else info)."""
    chosen = connection.state.get(_LEVEL_KEY, DEFAULT_LEVEL)
    return LEVELS.index(level) >= LEVELS.index(chosen)


def budget_of(connection: Connection, per_minute: int) -> Budget:
    budget = connection.state.get(_BUDGET_KEY)
    if not isinstance(budget, Budget):
        budget = connection.state[_BUDGET_KEY] = Budget(per_minute)
    return budget


def for_people(message: str, left_out: int) -> str:
    text = clip(redact_urls_in(message), MESSAGE_CHARS, "left out")[0]
    return f"{text} ({left_out} earlier messages left out: server.host_log_per_minute)" if left_out else text


async def set_level(ctx: ServerRequestContext[Any, Any], params: SetLevelRequestParams) -> EmptyResult:
    """``logging/setLevel``: this client's connection gets messages of `params.level` and above."""
    connection = connection_of(ctx.session)
    if connection is not None:
        connection.state[_LEVEL_KEY] = params.level
    return EmptyResult()


def warn_failed_calls(per_minute: int) -> Callable[..., Any]:
    """Middleware: a failed tool call is also a warning in the host's log, with the result's message."""
    shared = Budget(per_minute)  # sessionless clients have no connection that outlives a request

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        result = await call_next(ctx)
        if ctx.method != "tools/call":
            return result
        body = result.model_dump(by_alias=True, mode="json") if isinstance(result, BaseModel) else result
        if not isinstance(body, dict) or not body.get("isError"):
            return result
        name = (ctx.params or {}).get("name")
        said = " ".join(b.get("text", "") for b in body.get("content") or () if isinstance(b, dict)).strip()
        await tell(ctx, "warning", f"Tool {name!r} failed: {said}", shared)
        return result

    return middleware


async def tell(ctx: ServerRequestContext[Any, Any], level: LoggingLevel, message: str, shared: Budget) -> None:
    """Send one message on this request's stream, if its client wants that level (and the budget allows)."""
    connection = connection_of(ctx.session)
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS or connection is None:
        if level not in log_levels_asked(ctx.protocol_version, ctx.meta):
            return  # this request did not opt in (its `_meta` log level): it spends no one's budget
        budget = shared
    elif wanted(connection, level):
        budget = budget_of(connection, shared.per_minute)
    else:
        return
    left_out = budget.allow()
    if left_out is None:
        return
    with warnings.catch_warnings():  # the logging capability is deprecated at 2026-07-28, not before
        warnings.simplefilter("ignore")
        await ctx.session.send_log_message(level, for_people(message, left_out), LOGGER, ctx.request_id)


class HostLog(logging.Handler):
    """Forwards server events (records with ``extra=TO_HOST``, progress lines) to handshake-era connections."""

    def __init__(
        self, connections: Callable[[], Iterable[Connection]], per_minute: int, may_name_files: bool = True
    ) -> None:
        super().__init__(logging.INFO)
        self.connections = connections
        self.per_minute = per_minute
        #: False when callers may have document filters (a server filter, bearer tokens): a line that
        #: names files is then sent as its summary, since a file may lie outside a caller's filter.
        self.may_name_files = may_name_files
        self.pending: deque[tuple[LoggingLevel, str]] = deque(maxlen=_PENDING)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if self._loop is None or not (getattr(record, "to_host", False) or record.name == PROGRESS_LOGGER):
            return
        try:
            summary = getattr(record, "host_summary", None)
            message = record.getMessage() if self.may_name_files or summary is None else str(summary)
            item = (_BY_NUMBER.get(record.levelno, "info"), message)
            self._loop.call_soon_threadsafe(self._add, item)
        except Exception:  # a closed loop or a bad format: the server's own log still has it
            return

    def _add(self, item: tuple[LoggingLevel, str]) -> None:
        self.pending.append(item)
        if self._wake is not None:
            self._wake.set()

    async def run(self) -> None:
        """Send pending messages until cancelled (runs in the runtime's task group)."""
        self._loop, self._wake = asyncio.get_running_loop(), asyncio.Event()
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self.pending:
                level, message = self.pending.popleft()
                for connection in list(self.connections()):
                    await self._send(connection, level, message)

    async def _send(self, connection: Connection, level: LoggingLevel, message: str) -> None:
        if connection.protocol_version in MODERN_PROTOCOL_VERSIONS or not wanted(connection, level):
            return
        left_out = budget_of(connection, self.per_minute).allow()
        if left_out is not None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                await connection.log(level, for_people(message, left_out), LOGGER)  # best effort, never raises

    @contextmanager
    def attached(self) -> Any:
        """Listen to the package's loggers (and the progress logger, which does not propagate) meanwhile."""
        loggers = [logging.getLogger("mcp_analysis"), logging.getLogger(PROGRESS_LOGGER)]
        for logger in loggers:
            logger.addHandler(self)
        try:
            yield self
        finally:
            for logger in loggers:
                logger.removeHandler(self)
            self._loop = None
