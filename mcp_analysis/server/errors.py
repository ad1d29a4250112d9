"""How a user error crosses to the client: every handler's `AnalysisError` arrives as its message.

The SDK reports any exception from a tool, resource or completion handler that is not
its own error type without the message ("Error executing tool search", "Internal server
error"), so every such handler is wrapped by `user_errors`, which re-raises an
`AnalysisError` as the error type the SDK passes on (ToolError, ResourceError, MCPError).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR

from mcp_analysis.errors import AnalysisError
from mcp_analysis.text import clip

ERROR_CHARS = 2000  # an error message past this keeps its head and tail


def user_errors(error: Callable[[str], Exception]) -> Callable[[Any], Any]:
    """Decorator for an async handler: a user error reaches the client as `error(message)`."""

    def wrap(fn: Any) -> Any:
        @functools.wraps(fn)
        async def run(*args: Any, **kwargs: Any) -> Any:
            try:
                return await fn(*args, **kwargs)
            except AnalysisError as exc:  # a message may echo what the client sent: head and tail only
                raise error(clip(str(exc), ERROR_CHARS, "left out")[0]) from None

        return run

    return wrap


def protocol_error(message: str) -> MCPError:
    """The error for handlers the SDK answers as JSON-RPC errors (completion, resources/list)."""
    return MCPError(code=INTERNAL_ERROR, message=message)
