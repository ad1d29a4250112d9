"""Unknown names are invalid params (-32602), as the spec says, not the SDK's catch-all answers.

mcp 2.3 answers ``prompts/get`` of an unknown prompt with code 0 (its ValueError catch-all),
``completion/complete`` for an unknown prompt or argument with empty values, and ``tools/call`` of
an unknown tool with an ``isError`` result. The spec makes each a protocol error, -32602. This
middleware checks the name against what the server lists before the SDK's handler runs (public
API only: `MCPServer.list_tools`, `list_prompts`, `list_resource_templates`).

A tool argument the tool does not have is refused too, as the tool's failure (``isError``: the spec
answers bad arguments so, for the model to read and correct). The SDK drops such an argument, so
`search` with a `filter` ran unfiltered and its hits looked filtered.
"""

from __future__ import annotations

import re
from typing import Any

from mcp.server import MCPServer
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult, TextContent

from mcp_analysis.text import label

_TEMPLATE_PARAMETER = re.compile(r"{(\w+)}")


def exact_errors(server: MCPServer[Any]) -> Any:
    """The middleware for `server`: unknown tools, prompts, templates and arguments are -32602."""

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        params = ctx.params if isinstance(ctx.params, dict) else {}
        if ctx.method == "tools/call":
            arguments = await known_tool(server, params.get("name"))
            refused = unknown_arguments(params.get("name"), arguments, params.get("arguments"))
            if refused is not None:
                return refused
        elif ctx.method == "prompts/get":
            await prompt_arguments(server, params.get("name"))
        elif ctx.method == "completion/complete":
            await completable(server, params.get("ref"), params.get("argument"))
        return await call_next(ctx)

    return middleware


def invalid(message: str) -> MCPError:
    return MCPError(code=INVALID_PARAMS, message=message)


async def known_tool(server: MCPServer[Any], name: Any) -> list[str] | None:
    """The argument names of tool `name` (None if the SDK's validation is to answer); -32602 when there is no
    such tool."""
    tools = {tool.name: tool for tool in await server.list_tools()}
    if not isinstance(name, str):
        return None
    if name not in tools:
        raise invalid(f"Unknown tool: {label(name, 80)!r}. The tools are: {', '.join(tools)} (tools/list).")
    return list(tools[name].input_schema.get("properties") or {})


def unknown_arguments(name: Any, known: list[str] | None, arguments: Any) -> CallToolResult | None:
    """The tool's failure when `arguments` names one the tool does not have: nothing runs."""
    if known is None or not isinstance(arguments, dict):
        return None
    unknown = [key for key in arguments if key not in known]
    if not unknown:
        return None
    shown = ", ".join(repr(label(str(key), 80)) for key in unknown[:5]) + (", ..." if len(unknown) > 5 else "")
    plural = "s" if len(unknown) > 1 else ""
    message = (
        f"{name} has no argument{plural} {shown}; its arguments are: {', '.join(known) or 'none'}. "
        "Nothing was run: call it again without them."
    )
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


async def prompt_arguments(server: MCPServer[Any], name: Any) -> list[str]:
    """The argument names of prompt `name`; -32602 when there is no such prompt."""
    prompts = {prompt.name: prompt for prompt in await server.list_prompts()}
    prompt = prompts.get(name) if isinstance(name, str) else None
    if prompt is None:
        shown = label(name, 80) if isinstance(name, str) else name
        raise invalid(f"Unknown prompt: {shown!r}. The prompts are: {', '.join(prompts)} (prompts/list).")
    return [argument.name for argument in prompt.arguments or ()]


async def completable(server: MCPServer[Any], ref: Any, argument: Any) -> None:
    """A completion names a prompt or resource template the server has, and one of its arguments."""
    if not isinstance(ref, dict) or not isinstance(argument, dict):
        return  # the SDK's own validation answers a malformed request
    name = argument.get("name")
    if ref.get("type") == "ref/prompt":
        what, arguments = f"prompt {ref.get('name')!r}", await prompt_arguments(server, ref.get("name"))
    elif ref.get("type") == "ref/resource":
        uri = ref.get("uri")
        templates = [t.uri_template for t in await server.list_resource_templates()]
        if uri not in templates:
            shown = label(uri, 120) if isinstance(uri, str) else uri
            raise invalid(f"Unknown resource template: {shown!r} (resources/templates/list names them).")
        what, arguments = f"template {uri}", _TEMPLATE_PARAMETER.findall(uri)
    else:
        return
    if name not in arguments:
        shown = label(name, 80) if isinstance(name, str) else name
        raise invalid(f"The {what} has no argument {shown!r}; its arguments are: {', '.join(arguments) or 'none'}.")
