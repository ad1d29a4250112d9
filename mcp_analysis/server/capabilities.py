"""What `initialize` (and 2026-07-28's `server/discover`) advertise beyond the SDK's derivation.

The MCP Apps extension (`io.modelcontextprotocol/ui`, server/view.py) is advertised to a host
that declared it with the view's MIME type, and to no other: the SDK would list it for everyone
at 2026-07-28 and, on the handshake, for no one.
"""

from __future__ import annotations

from typing import Any

from mcp.server.apps import APP_MIME_TYPE, EXTENSION_ID
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

from mcp_analysis.server.view import renders_view

ADVERTISING = ("initialize", "server/discover")


async def advertise_view(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """The extension in the reply's capabilities exactly when the host declared it."""
    result = await call_next(ctx)
    if ctx.method not in ADVERTISING or not isinstance(result, dict):
        return result
    capabilities = result.get("capabilities")
    if not isinstance(capabilities, dict):
        return result
    extensions = dict(capabilities.get("extensions") or {})
    if renders_view(ctx) or _declared_in(ctx.params):
        extensions[EXTENSION_ID] = {}  # the extension has no server settings
    else:
        extensions.pop(EXTENSION_ID, None)
    if extensions:
        capabilities["extensions"] = extensions
    else:
        capabilities.pop("extensions", None)
    return result


def _declared_in(params: Any) -> bool:
    """Whether an `initialize` request's own capabilities declare the extension and the view's MIME type."""
    capabilities = params.get("capabilities") if isinstance(params, dict) else None
    extensions = capabilities.get("extensions") if isinstance(capabilities, dict) else None
    settings = extensions.get(EXTENSION_ID) if isinstance(extensions, dict) else None
    if not isinstance(settings, dict):
        return False
    return APP_MIME_TYPE in (settings.get("mimeTypes") or ())
