"""``resources/subscribe`` and ``unsubscribe`` (handshake-era clients): document resources, per connection.

Who is told what, and when, is server/updates.py.
"""

from __future__ import annotations

from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, EmptyResult, SubscribeRequestParams, UnsubscribeRequestParams

from mcp_analysis.server.calls import runtime_of
from mcp_analysis.server.identity import caller_filter
from mcp_analysis.server.sdk_compat import connection_of
from mcp_analysis.server.updates import MAX_PER_CONNECTION, document_of, subscribed
from mcp_analysis.text import label


async def subscribe(ctx: ServerRequestContext[Any, Any], params: SubscribeRequestParams) -> EmptyResult:
    """``resources/subscribe``: a document resource the caller can read, kept on its connection."""
    uri = str(params.uri)
    found = document_of(uri)
    if found is None:
        raise MCPError(
            code=INVALID_PARAMS,
            message=f"Only document resources (documents:///{{id}}/...) can be subscribed, not {label(uri, 120)!r}.",
        )
    runtime = await runtime_of(ctx).ready()
    assert runtime.kb is not None
    _, document_filter = caller_filter(runtime)
    if await runtime.kb.corpus(document_filter).find(found[0]) is None:
        message = f"No document {label(found[0])!r} (unknown, or outside your filter)."
        raise MCPError(code=INVALID_PARAMS, message=message)
    connection = connection_of(ctx.session)
    if connection is not None:
        mine = subscribed(connection)
        if uri not in mine and len(mine) >= MAX_PER_CONNECTION:
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"This connection holds {len(mine)} subscriptions, the most one may hold; "
                "unsubscribe some first.",
            )
        mine[uri] = document_filter  # a changed file's new document is followed only if this filter sees it
    return EmptyResult()


async def unsubscribe(ctx: ServerRequestContext[Any, Any], params: UnsubscribeRequestParams) -> EmptyResult:
    connection = connection_of(ctx.session)
    if connection is not None:
        subscribed(connection).pop(str(params.uri), None)
    return EmptyResult()
