"""The one place that touches mcp SDK internals (mcp is pinned ``>=2.3.0,<2.4``).

mcp 2.3 gives a tool handler no public way to reach its `Connection` (the
low-level ``Context.connection`` exists but the runner does not build it), yet
two things need the connection itself:

- the transport-validated session id of a legacy streamable-HTTP client
  (``Connection.session_id``, set by the SDK's session manager only after it
  accepted the ``mcp-session-id`` header) — the only session id that may
  identify a client (server/identity.py);
- its teardown (``Connection.exit_stack``) and its standalone stream
  (``Connection.notify``): an ended session frees its analysis, and legacy
  clients hear ``resources/list_changed`` (server/runtime.py).

Serving stdio through our own screening reader (server/stdio.py) needs the
low-level ``Server`` that ``MCPServer`` wraps, to call its public ``run(read,
write, init_options)`` — ``MCPServer`` only offers ``run_stdio_async()``, which
reads stdin itself. That is ``MCPServer._lowlevel_server`` (`lowlevel_server`).

Bounding legacy streamable-HTTP sessions (server/legacy_http.py) needs the SDK's
session manager's table of open sessions (``StreamableHTTPSessionManager._server_instances``,
`open_legacy_sessions`) and each transport's idle timeout
(``StreamableHTTPServerTransport._idle_timeout``, `set_idle_timeout`): the SDK gives every
session one timeout, fixed when it opens, while a session that never made a call should end
much sooner than one in use.

Whether a caller asked for progress (`progress_wanted`) is in the request's public ``_meta``
on JSON-RPC transports; an in-process client's callback is known only to the SDK's direct
dispatch context (``ServerSession._request_outbound``, unwrapped: ``_on_progress``; the
2026-07-28 HTTP transport's keeps the token as ``progress_token``). Asking spares every call that
did not ask the task that would report progress each second.

Whether a 2026-07-28 request opted in to log messages at a level (`log_levels_asked`) is the
SDK's own rule (``mcp.server.connection.allowed_log_levels``, outside that module's ``__all__``):
the host log (server/host_log.py) asks it before spending a message of its budget.

Everything else uses public API: the paged ``resources/list`` is a request handler of the
low-level server (``add_request_handler``, in place of the SDK's), advertising
``resources.listChanged`` goes through ``MCPServer.middleware``. If the SDK changes
under this module, tests/server/test_sdk_compat.py fails loudly; at run time
`connection_of` degrades to ``None`` (legacy HTTP clients are then served like
sessionless ones, and hear no list-changed notifications).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import anyio
from mcp.server import MCPServer
from mcp.server import connection as _connection_module
from mcp.server.connection import Connection
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager


def connection_of(session: Any) -> Connection | None:
    """The `Connection` behind a request's `ServerSession` (``ctx.session``), if the SDK still exposes it."""
    connection = getattr(session, "_connection", None)  # SDK 2.3: ServerSession keeps its Connection here
    return connection if isinstance(connection, Connection) else None


def transport_session_id(session: Any) -> str | None:
    """The session id the transport validated for this request: legacy streamable HTTP only.

    ``None`` on stdio, on sessionless 2026-07-28 HTTP (where the SDK never checks an
    ``mcp-session-id`` header) and whenever the SDK did not establish a session.
    """
    connection = connection_of(session)
    return connection.session_id if connection is not None else None


def progress_wanted(request: Any) -> bool:
    """Whether the caller of this request (a ``ServerRequestContext``) listens for progress.

    True when unsure: reporting progress nobody asked for is a no-op, missing it is not."""
    try:
        return _progress_wanted(request)
    except Exception:  # an SDK that changed shape must not fail the call
        return True


def _progress_wanted(request: Any) -> bool:
    meta = getattr(request, "meta", None) or {}
    if meta.get("progress_token") is not None or meta.get("progressToken") is not None:
        return True
    # SDK 2.3: the request's ServerSession reports progress through its DispatchContext, kept
    # here, maybe inside wrappers that keep the one they wrap as `_inner`.
    dispatch = getattr(getattr(request, "session", None), "_request_outbound", None)
    for _ in range(4):
        if not hasattr(dispatch, "_inner"):
            break
        dispatch = dispatch._inner  # type: ignore[union-attr]
    if hasattr(dispatch, "_progress_token"):  # JSON-RPC: the token came from `_meta`, read above
        return dispatch._progress_token is not None  # type: ignore[union-attr]
    if hasattr(dispatch, "progress_token"):  # 2026-07-28 HTTP: one dispatch context per request
        return dispatch.progress_token is not None  # type: ignore[union-attr]
    if hasattr(dispatch, "_on_progress"):  # in-process (direct) dispatch: the client's callback
        return dispatch._on_progress is not None  # type: ignore[union-attr]
    return True


def log_levels_asked(protocol_version: str, meta: Any) -> frozenset[str]:
    """The `notifications/message` levels one request may be sent (all of them before 2026-07-28,
    where `logging/setLevel` decides; at 2026-07-28 those its ``_meta`` log level opted in to)."""
    rule = getattr(_connection_module, "allowed_log_levels", None)
    if rule is None:
        raise RuntimeError(
            "mcp SDK changed: mcp.server.connection no longer has `allowed_log_levels`; "
            "update mcp_analysis/server/sdk_compat.py"
        )
    return frozenset(rule(protocol_version, meta))


def lowlevel_server(server: MCPServer) -> Server:
    """The low-level `Server` an `MCPServer` wraps (to run it over our own stdio streams)."""
    lowlevel = getattr(server, "_lowlevel_server", None)  # SDK 2.3: MCPServer keeps it here
    if not isinstance(lowlevel, Server):
        raise RuntimeError(
            "mcp SDK changed: MCPServer no longer exposes its low-level Server as `_lowlevel_server`; "
            "update mcp_analysis/server/sdk_compat.py"
        )
    return lowlevel


def open_legacy_sessions(manager: StreamableHTTPSessionManager) -> Mapping[str, StreamableHTTPServerTransport]:
    """The legacy HTTP sessions the SDK's session manager holds open now, by session id (read only).

    SDK 2.3 keeps them in ``_server_instances`` (a session leaves it when it ends, however it ends)."""
    sessions = getattr(manager, "_server_instances", None)
    if not isinstance(sessions, dict):
        raise RuntimeError(
            "mcp SDK changed: StreamableHTTPSessionManager no longer keeps its sessions in `_server_instances`; "
            "update mcp_analysis/server/sdk_compat.py"
        )
    return sessions


def set_idle_timeout(transport: StreamableHTTPServerTransport, seconds: float) -> bool:
    """End `transport`'s session after `seconds` without a request in flight (from now on); False if the
    SDK no longer lets us (the session then keeps the timeout it opened with).

    SDK 2.3 reads ``_idle_timeout`` whenever the last request in flight ends and then moves the
    deadline of ``idle_scope``; while none is in flight, the deadline is moved here."""
    if not isinstance(getattr(transport, "_idle_timeout", None), int | float) or not math.isfinite(seconds):
        return False
    transport._idle_timeout = seconds
    scope = transport.idle_scope
    if scope is not None and not getattr(transport, "_requests_in_flight", 0) and not scope.cancel_called:
        scope.deadline = anyio.current_time() + seconds
    return True
