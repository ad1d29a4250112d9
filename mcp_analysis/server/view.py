"""The MCP App view, offered only to hosts that declare the extension (`io.modelcontextprotocol/ui`).

`view_extension()` serves the view (`ui://mcp-analysis/analysis`, `text/html;profile=mcp-app`)
and advertises the extension in the server's capabilities. `link_view` is the `tools/list`
middleware that points search, execute_code and cite at it (`_meta.ui.resourceUri`, and the
older flat key `ui/resourceUri` hosts of the extension's drafts read) — for a client that
declared the extension with the view's MIME type, and for no other: everyone else gets
tools/list exactly as without the view. `renders_view(ctx)` tells a tool the same.
"""

from __future__ import annotations

from typing import Any

from mcp.server.apps import Apps, client_supports_apps
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context

from mcp_analysis.ui import VIEW_URI, view_html

#: The tools whose results the view shows.
VIEW_TOOLS = ("search", "execute_code", "cite")
VIEW_META = {"ui": {"resourceUri": VIEW_URI}, "ui/resourceUri": VIEW_URI}


def view_extension() -> Apps:
    """The extension the server is built with: the view as a `ui://` resource (no network, no domains)."""
    apps = Apps()
    apps.add_html_resource(
        VIEW_URI,
        view_html(),
        name="analysis-view",
        title="Analysis view",
        description="Shows execute_code output and charts, search hits and citations; opens cited passages.",
        prefers_border=True,
    )
    return apps


def renders_view(ctx: Context[Any] | ServerRequestContext[Any, Any]) -> bool:
    """Whether the calling host declared the extension (and the view's MIME type)."""
    try:
        return client_supports_apps(ctx)
    except (AttributeError, LookupError, ValueError):  # a context without a client session (a direct call)
        return False


async def link_view(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """`tools/list`: the view's tools carry `_meta.ui.resourceUri` for hosts that render the view."""
    result = await call_next(ctx)
    if ctx.method != "tools/list" or not isinstance(result, dict) or not renders_view(ctx):
        return result
    for tool in result.get("tools") or ():
        if isinstance(tool, dict) and tool.get("name") in VIEW_TOOLS:
            tool["_meta"] = {**(tool.get("_meta") or {}), **VIEW_META}
    return result
