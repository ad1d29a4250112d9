"""What one request needs: the server's runtime, the caller's session, and the MCP reply.

The runtime is what the server's lifespan yields (`AnalysisServer`), so every handler and
middleware reaches it through its request context — a tool through
``ctx.request_context.lifespan_context``, a middleware through ``ctx.lifespan_context``.
A tool starts with `tool_call` (the caller's session, the note about its handle, the
result budget) and ends with `ToolCall.reply`, which wraps a shaped result for MCP.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context
from mcp_types import CallToolResult, ImageContent, TextContent
from pydantic import BaseModel

from mcp_analysis.errors import AnalysisError
from mcp_analysis.server.identity import session_for
from mcp_analysis.server.runtime import Runtime
from mcp_analysis.server.view import renders_view
from mcp_analysis.tooling.fitting import cost

if TYPE_CHECKING:
    from mcp_analysis.config import Settings
    from mcp_analysis.session.analysis import AnalysisSession

log = logging.getLogger(__name__)


def runtime_of(ctx: Context | ServerRequestContext[Any, Any]) -> Runtime:
    """The runtime of the server handling this request (started or not: see `Runtime.ready`)."""
    request = ctx.request_context if isinstance(ctx, Context) else ctx
    runtime = request.lifespan_context
    if not isinstance(runtime, Runtime):
        raise AnalysisError("This server has no mcp-analysis runtime (its lifespan must yield one).")
    return runtime


def session_note(session_id: str, must_pass: bool) -> str:
    """What a sessionless caller must read: the handle to pass back (nothing for everyone else)."""
    if not must_pass:
        return ""
    return (
        f'\n\nsession: {session_id} — pass session="{session_id}" in your next calls to keep '
        "your variables, searches and citations."
    )


def reply(model: BaseModel, text: str, budget: int, pngs: Sequence[str] = ()) -> CallToolResult:
    """A shaped result as MCP sends it: the text for the model, the model as structured content,
    and PNGs (base64) as image content, each counted by its base64 length."""
    structured = model.model_dump(mode="json")
    over = cost(structured, text) + sum(map(len, pngs)) - budget
    if over > 0:  # the shapers prevent this; never send more than the budget anyway
        log.warning("tool result over budget by %d characters; cutting its text", over)
        text = text[: max(0, len(text) - over)]
    images = [ImageContent(type="image", data=png, mime_type="image/png") for png in pngs]
    return CallToolResult(content=[TextContent(type="text", text=text), *images], structured_content=structured)


@dataclass(frozen=True)
class ToolCall:
    """One tool call: the caller's session, the note its result ends with, and the settings."""

    analysis: AnalysisSession
    note: str
    settings: Settings
    #: The host renders the MCP App view (server/view.py): results may carry what only it shows.
    view: bool = False

    @property
    def budget(self) -> int:
        """Characters one result may cost (text + structured content)."""
        return self.settings.server.max_result_chars

    def reply(self, shaped: tuple[BaseModel, str], pngs: Sequence[str] = ()) -> CallToolResult:
        model, text = shaped
        return reply(model, text, self.budget, pngs)


async def tool_call(ctx: Context, handle: str | None) -> ToolCall:
    """Resolve the caller's session (by `handle`, or by who is calling) for one tool call."""
    runtime = await runtime_of(ctx).ready()
    analysis, must_pass = await session_for(ctx, handle)
    return ToolCall(analysis, session_note(analysis.id, must_pass), runtime.settings, renders_view(ctx))
