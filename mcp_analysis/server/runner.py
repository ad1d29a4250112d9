"""`mcp-analysis serve`: stdio (default) or streamable HTTP on both protocol eras.

Over stdio the SDK points fd 1 at stderr while serving, and the interpreter workers
are only spawned after that, so nothing but protocol messages reaches the wire.
Over HTTP, Host and Origin headers are checked (DNS-rebinding protection): loopback
names are always allowed, others only when listed with --allowed-host/--allowed-origin.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE, TransportSecuritySettings

from mcp_analysis.config import Settings
from mcp_analysis.errors import DatabaseNotFoundError
from mcp_analysis.paths import is_local_path, missing_database

if TYPE_CHECKING:
    from mcp.server.streamable_http import EventStore

    from mcp_analysis.corpus import KnowledgeBase
    from mcp_analysis.server.runtime import Runtime

    RuntimeHook = Callable[[Runtime], None]

log = logging.getLogger(__name__)

_LOOPBACK = ("127.0.0.1", "localhost", "[::1]")
RECONNECT_MS = 1000


class KnowledgeBaseOpener(Protocol):
    """Opens the knowledge base a server serves (the runtime calls it once the server answers)."""

    async def open(self, settings: Settings) -> KnowledgeBase: ...


def security_settings(settings: Settings) -> TransportSecuritySettings:
    server = settings.server
    hosts = [f"{name}:*" for name in _LOOPBACK] + list(server.allowed_hosts)
    origins = [f"http://{name}:*" for name in _LOOPBACK] + list(server.allowed_origins)
    bind = server.host
    if bind not in ("127.0.0.1", "localhost", "::1", "0.0.0.0", "::"):
        hosts.append(f"{bind}:*")
        origins.append(f"http://{bind}:*")
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins)


class MissingDatabase:
    """The opener of a stdio server started by a host before its knowledge base exists: every tool
    call answers with `error` (how to create it), where a server that exits shows the host only
    "Connection closed"."""

    def __init__(self, error: DatabaseNotFoundError) -> None:
        self.error = error

    async def open(self, settings: Settings) -> KnowledgeBase:
        raise self.error


def check_database(settings: Settings) -> None:
    """Fail fast on a missing knowledge base (cheap: no LanceDB import before serving).

    Deeper problems (embedder mismatch, bad --filter) are found when the runtime opens
    the database right after the server starts; they are logged and every tool call
    reports them.
    """
    db = str(settings.db)
    if is_local_path(db) and not (Path(db) / "document_meta.lance").is_dir():
        raise missing_database(Path(db))


def build_http_app(
    settings: Settings, opener: KnowledgeBaseOpener | None = None, on_runtime: RuntimeHook | None = None
) -> object:
    """The ASGI app of `serve --http`; `opener` and `on_runtime` as for `run_server`."""
    from starlette.middleware import Middleware

    from mcp_analysis.server.app import create_server
    from mcp_analysis.server.event_store import EventScope
    from mcp_analysis.server.jsonrpc_screen import ScreenedHttpBodies
    from mcp_analysis.server.legacy_http import LegacySessionGuard, LegacySessions
    from mcp_analysis.server.metrics import Observability
    from mcp_analysis.server.sdk_compat import open_legacy_sessions

    server = create_server(config=settings, http=True)
    if opener is not None:
        server.runtime.opener = opener
    if on_runtime is not None:
        on_runtime(server.runtime)
    tokens = settings.server.tokens_file is not None
    security = security_settings(settings)
    Observability(server, server.runtime, details_need_token=tokens, security=security).install()  # /healthz, /metrics
    app = server.streamable_http_app(
        streamable_http_path=settings.server.path,
        transport_security=security,
        host=settings.server.host,
        session_idle_timeout=settings.sessions.ttl_seconds,
        max_sessions=settings.sessions.max_sessions,  # the guard below refuses first, with a clearer message
        event_store=event_store(settings),
        retry_interval=RECONNECT_MS,  # in each stream's priming event: when a dropped client should come back
    )
    # Inside authentication: malformed JSON-RPC bodies get the same answers as on stdio.
    app.user_middleware.append(
        Middleware(
            ScreenedHttpBodies,
            path=settings.server.path,
            require_auth=settings.server.tokens_file is not None,
            max_body=DEFAULT_MAX_REQUEST_BODY_SIZE,
        )
    )
    # Innermost: legacy HTTP sessions bounded per client and in total, short-lived until used.
    sdk_sessions = server.session_manager
    runtime = server.runtime
    legacy = LegacySessions(
        settings,
        lambda: open_legacy_sessions(sdk_sessions),
        lambda: runtime.sessions.memory if runtime.sessions is not None else None,
    )
    app.user_middleware.append(Middleware(LegacySessionGuard, path=settings.server.path, sessions=legacy))
    # Innermost of all: whose SSE events the event store keeps and replays (server/event_store.py).
    app.user_middleware.append(Middleware(EventScope))
    return app


def event_store(settings: Settings) -> EventStore | None:
    """Where SSE events wait for a client that reconnects (server/event_store.py); None turns resuming off."""
    from mcp_analysis.server.event_store import BoundedEventStore

    megabytes = settings.server.resume_buffer_mb
    return BoundedEventStore(megabytes * 1024 * 1024, settings.server.resume_seconds) if megabytes else None


async def run_server(
    settings: Settings,
    *,
    http: bool = False,
    opener: KnowledgeBaseOpener | None = None,
    on_runtime: RuntimeHook | None = None,
) -> None:
    """Serve until the client (stdio) or the process (HTTP) ends.

    `opener` opens the knowledge base in the background once the server answers (its
    `open(settings)` returns a `KnowledgeBase`), e.g. building the sample first; without
    one, a missing local knowledge base is an error before anything starts (over stdio with no
    terminal, i.e. started by a host, it is served anyway: each tool call says so). `on_runtime`
    is handed the server's runtime (a folder watcher in this process tells it of changes).
    """
    from mcp_analysis.server.app import create_server

    missing: DatabaseNotFoundError | None = None
    if opener is None:
        try:
            check_database(settings)
        except DatabaseNotFoundError as exc:
            if http or sys.stdin.isatty():
                raise
            log.error("%s Serving anyway (an MCP host started this): every tool call says so.", exc)
            missing, opener = exc, MissingDatabase(exc)
    if not http:
        log.info("mcp-analysis serving %s over stdio", settings.db)
        if sys.stdin.isatty():
            log.warning(
                "Waiting for an MCP client on stdin. An MCP host (Claude Desktop, VS Code, the MCP "
                "Inspector) should launch this command itself; see the README. For a network "
                "server use `serve --http`. Ctrl-C to stop."
            )
        from mcp_analysis.server.stdio import serve_stdio

        server = create_server(config=settings)
        if opener is not None:
            server.runtime.opener = opener
        if on_runtime is not None:
            on_runtime(server.runtime)
        await serve_stdio(server)  # every malformed line is answered (server/jsonrpc_screen.py)
        if missing is not None:
            raise missing  # the exit status says the server could not do its work
        return

    import uvicorn

    app = build_http_app(settings, opener, on_runtime)
    server_settings = settings.server
    if server_settings.host in ("0.0.0.0", "::") and not server_settings.allowed_hosts:
        log.warning(
            "Listening on all interfaces: requests must use a loopback Host header unless you add "
            "--allowed-host NAME:PORT for the names clients use."
        )
    if server_settings.tokens_file is None and server_settings.host not in ("127.0.0.1", "localhost", "::1"):
        log.warning("No --tokens-file: anyone who can reach %s can read the knowledge base.", server_settings.host)
    from mcp_analysis.server.connections import QuietAcceptErrors, file_shares, guarded_h11, more_files

    logging.getLogger("asyncio").addFilter(QuietAcceptErrors())
    backlog, max_pending, max_open = file_shares(more_files(), server_settings.max_pending_connections)
    config = uvicorn.Config(
        app,  # type: ignore[arg-type]
        http=guarded_h11(max_pending, server_settings.client_stall_seconds, max_open),
        backlog=backlog,
        ws="none",  # no WebSocket endpoint: an upgrade request is answered as plain HTTP
        host=server_settings.host,
        port=server_settings.port,
        log_level=server_settings.log_level.lower(),
        log_config=None,
        access_log=server_settings.log_level == "DEBUG",
    )
    log.info(
        "mcp-analysis serving %s at http://%s:%s%s",
        settings.db,
        server_settings.host,
        server_settings.port,
        server_settings.path,
    )
    await uvicorn.Server(config).serve()
