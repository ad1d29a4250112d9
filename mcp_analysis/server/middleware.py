"""The middleware around every inbound message, outermost first in `MIDDLEWARE`.

Each is an ``async (ctx, call_next)`` function in the SDK's `MCPServer.middleware` chain;
`ctx` is the low-level request context (method, raw params, the lifespan's `Runtime`).
What MCP methods mean to the analysis layer (a tool call or a resource read is one
"call", whose session locks end with it) is decided here, not in session/.
"""

from __future__ import annotations

from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp_analysis.server.calls import runtime_of
from mcp_analysis.session.clients import client_address
from mcp_analysis.session.scope import call_scope

Request = ServerRequestContext[Any, Any]

#: The requests that work on a caller's session: each runs in one call scope.
SESSION_CALLS = ("tools/call", "resources/read")


async def reject_invalid_text(ctx: Request, call_next: CallNext) -> HandlerResult:
    """Text that is not valid Unicode (a lone surrogate) is refused before any tool sees it.

    Over stdio and HTTP the wire screen already answers such a message (-32600); this
    covers in-process clients, with the same meaning: the request itself is invalid.
    """
    where = invalid_text(ctx.params)
    if where is not None:
        raise MCPError(
            code=INVALID_PARAMS,
            message=f"Invalid params: {where} holds text that is not valid Unicode (a lone surrogate such as "
            "\\ud800); send UTF-8 text.",
        )
    return await call_next(ctx)


async def remember_legacy_connections(ctx: Request, call_next: CallNext) -> HandlerResult:
    """Handshake-era connections hear list-changed notifications on their own stream."""
    if ctx.request_id is not None and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        runtime_of(ctx).remember_legacy_session(ctx.session)
    return await call_next(ctx)


async def one_call_scope(ctx: Request, call_next: CallNext) -> HandlerResult:
    """Session locks (a shared store's leases) taken while serving a tool call or resource read end with it;
    the sessions it opens count for the client's address (session/clients.py)."""
    if ctx.method not in SESSION_CALLS:
        return await call_next(ctx)
    with client_address(address_of(ctx.request)):
        async with call_scope():
            return await call_next(ctx)


def address_of(request: Any) -> str | None:
    """The client address of an HTTP request (as the proxy forwards it, when trusted); None over stdio."""
    client = getattr(request, "client", None)
    return getattr(client, "host", None)


async def advertise_list_changes(ctx: Request, call_next: CallNext) -> HandlerResult:
    """Handshake-era clients learn from `initialize` that resources/list_changed is sent.

    (2026-07-28 clients learn it from subscriptions/listen being served.)
    """
    result = await call_next(ctx)
    if ctx.method == "initialize" and isinstance(result, dict):
        resources = (result.get("capabilities") or {}).get("resources")
        if isinstance(resources, dict):
            resources["listChanged"] = True
    return result


MIDDLEWARE = [reject_invalid_text, remember_legacy_connections, one_call_scope, advertise_list_changes]


def invalid_text(value: Any, where: str = "params") -> str | None:
    """Where in `value` a string that cannot be UTF-8 encoded sits, if any."""
    stack: list[tuple[Any, str]] = [(value, where)]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return path
        elif isinstance(item, dict):
            stack.extend((v, f"{path}.{k}") for k, v in item.items())
            stack.extend((k, f"{path} (a key)") for k in item if isinstance(k, str))
        elif isinstance(item, list | tuple):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(item))
    return None
