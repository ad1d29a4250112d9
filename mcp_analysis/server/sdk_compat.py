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

Everything else uses public API: paging ``resources/list`` and advertising
``resources.listChanged`` go through ``MCPServer.middleware``. If the SDK changes
under this module, tests/server/test_sdk_compat.py fails loudly; at run time
`connection_of` degrades to ``None`` (legacy HTTP clients are then served like
sessionless ones, and hear no list-changed notifications).
"""

from __future__ import annotations

from typing import Any

from mcp.server import MCPServer
from mcp.server.connection import Connection
from mcp.server.lowlevel.server import Server


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


def lowlevel_server(server: MCPServer) -> Server:
    """The low-level `Server` an `MCPServer` wraps (to run it over our own stdio streams)."""
    lowlevel = getattr(server, "_lowlevel_server", None)  # SDK 2.3: MCPServer keeps it here
    if not isinstance(lowlevel, Server):
        raise RuntimeError(
            "mcp SDK changed: MCPServer no longer exposes its low-level Server as `_lowlevel_server`; "
            "update mcp_analysis/server/sdk_compat.py"
        )
    return lowlevel
