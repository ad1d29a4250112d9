"""The MCP server, assembled: settings, auth, runtime, middleware, tools, resources, prompt, view.

Each part lives in its own module (server/tools.py, resources.py, middleware.py, uris.py);
this one only puts them together. The `Runtime` (knowledge base, worker pool, sessions) is
what the server's lifespan yields, so handlers reach it through their request context.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any

from mcp.server import MCPServer
from mcp.server.auth.settings import AuthSettings
from mcp.server.subscriptions import InMemorySubscriptionBus
from mcp_types import SetLevelRequestParams, SubscribeRequestParams, UnsubscribeRequestParams
from pydantic import AnyHttpUrl, Field

from mcp_analysis.config import Settings, load_settings, with_db
from mcp_analysis.server.auth import TokenFileVerifier, warn_if_readable_by_others
from mcp_analysis.server.capabilities import advertise_view
from mcp_analysis.server.exact_errors import exact_errors
from mcp_analysis.server.host_log import set_level, warn_failed_calls
from mcp_analysis.server.middleware import MIDDLEWARE
from mcp_analysis.server.resources import register_resources
from mcp_analysis.server.runtime import Runtime
from mcp_analysis.server.sdk_compat import lowlevel_server
from mcp_analysis.server.subscribe import subscribe, unsubscribe
from mcp_analysis.server.tools import register_tools
from mcp_analysis.server.view import link_view, view_extension
from mcp_analysis.tooling.descriptions import ANALYZE_PROMPT, INSTRUCTIONS
from mcp_analysis.version import __version__


class AnalysisServer(MCPServer[Runtime]):
    """An MCPServer whose lifespan runs and yields its `runtime`, shared by all its connections."""

    def __init__(self, runtime: Runtime, **kwargs: Any) -> None:
        super().__init__(
            "mcp-analysis",
            title="Document analysis",
            version=__version__,
            instructions=INSTRUCTIONS,
            subscriptions=runtime.bus,
            lifespan=serve_runtime,
            log_level=runtime.settings.server.log_level,
            **kwargs,
        )
        self.runtime = runtime


@asynccontextmanager
async def serve_runtime(server: MCPServer[Runtime]) -> AsyncIterator[Runtime]:
    """The server's lifespan: the runtime starts with its first connection and stops after its last."""
    assert isinstance(server, AnalysisServer)
    async with server.runtime.use() as runtime:
        yield runtime


def analyze(question: Annotated[str, Field(description="The question to answer.")]) -> str:
    """The `analyze` prompt: the analysis workflow for one question."""
    return ANALYZE_PROMPT.format(question=question)


def bearer_auth(settings: Settings) -> dict[str, Any]:
    """The bearer-token arguments of an HTTP server with a tokens file (none without one)."""
    if settings.server.tokens_file is None:
        return {}
    base = f"http://{settings.server.host}:{settings.server.port}"
    verifier = TokenFileVerifier(settings.server.tokens_file)
    warn_if_readable_by_others(settings.server.tokens_file, verifier.entries)
    return {
        "token_verifier": verifier,
        "auth": AuthSettings(
            issuer_url=AnyHttpUrl(base),
            resource_server_url=AnyHttpUrl(f"{base}{settings.server.path}"),
            # The tokens file's tokens are bound to this server by being in its file, not to a resource
            # indicator (RFC 8707): left unset, the SDK warns at every start and its 3.0 refuses them all.
            validate_token_resource=False,
        ),
    }


def create_server(
    db_path: str | Path | None = None,
    config: Settings | None = None,
    *,
    http: bool = False,
    view: bool = True,
) -> AnalysisServer:
    """Build the MCP server for a knowledge base (stdio by default; ``http=True`` adds bearer auth).

    ``view=False`` leaves out the MCP App view (server/view.py), which only hosts that declare
    the extension ever see."""
    settings = config or load_settings()
    if db_path is not None:
        settings = with_db(settings, db_path)
    runtime = Runtime(settings, InMemorySubscriptionBus())
    extensions = {"extensions": [view_extension()]} if view else {}
    server = AnalysisServer(runtime, **(bearer_auth(settings) if http else {}), **extensions)
    server.middleware.extend(MIDDLEWARE)
    # Outermost first: a call refused for an argument it does not take is a failed call in the host's log too.
    server.middleware.extend([warn_failed_calls(settings.server.host_log_per_minute), exact_errors(server)])
    # The logging capability (declared because this handler exists): a client's level, per connection.
    lowlevel = lowlevel_server(server)
    lowlevel.add_request_handler("logging/setLevel", SetLevelRequestParams, set_level)
    # resources.subscribe (declared because these handlers exist): document resources, server/updates.py.
    lowlevel.add_request_handler("resources/subscribe", SubscribeRequestParams, subscribe)
    lowlevel.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, unsubscribe)
    if view:
        server.middleware.extend([link_view, advertise_view])
    register_tools(server)
    register_resources(server, runtime)
    server.prompt(name="analyze", title="Analyse a question", description="The analysis workflow for a question.")(
        analyze
    )
    return server
