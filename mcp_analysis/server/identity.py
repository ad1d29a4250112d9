"""Who is calling, and which analysis session is theirs.

A client is, in this order:

1. an explicit ``session`` handle passed as a tool argument (any transport);
2. the process, for stdio (and the in-memory test transport): one process, one client;
3. the session id of a legacy (handshake-era) streamable-HTTP connection, as validated
   by the SDK's session manager — never a bare ``mcp-session-id`` header: on the
   sessionless 2026-07-28 path the SDK does not check that header, so a request
   carrying another client's id would otherwise read that client's variables;
4. the authenticated principal (bearer token) on sessionless 2026-07-28 HTTP;
5. otherwise (sessionless, anonymous HTTP) a new session is created and its handle
   is returned in the result; the model passes it back as ``session``.

The document filter is the server's ``--filter`` ANDed with the token's filter. It is
set here, by the operator's configuration, never by a tool argument.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.mcpserver import Context

from mcp_analysis.errors import AnalysisError
from mcp_analysis.server.runtime import Runtime
from mcp_analysis.server.sdk_compat import transport_session_id
from mcp_analysis.session.keys import SessionKey
from mcp_analysis.store.filters import combine_filters

if TYPE_CHECKING:
    from mcp_analysis.session.analysis import AnalysisSession


@dataclass(frozen=True)
class Caller:
    key: SessionKey | None  # None: a sessionless anonymous client (a new handle is issued)
    owner: str | None
    filter: str | None
    sessionless: bool


def caller_filter(runtime: Runtime) -> tuple[str | None, str | None]:
    """(owner, filter) of the current request: token principal and combined filter."""
    token = get_access_token()
    owner = token.client_id if token is not None else None
    token_filter = (token.claims or {}).get("filter") if token is not None else None
    return owner, combine_filters(runtime.server_filter, token_filter)


def identify(ctx: Context, runtime: Runtime) -> Caller:
    owner, document_filter = caller_filter(runtime)
    if ctx.headers is None:
        return Caller(SessionKey.local(), owner, document_filter, False)
    session_id = transport_session_id(ctx.session)
    if session_id:
        return Caller(SessionKey.http(session_id), owner, document_filter, False)
    if owner is not None:
        return Caller(SessionKey.principal(owner), owner, document_filter, False)
    return Caller(None, None, document_filter, True)


async def session_for(ctx: Context, session: str | None) -> tuple[AnalysisSession, bool]:
    """The caller's session, and whether the model must pass its handle back."""
    runtime: Runtime = await _runtime(ctx)
    caller = identify(ctx, runtime)
    manager = runtime.sessions
    assert manager is not None
    if session:
        found = await manager.resolve(session.strip(), owner=caller.owner, document_filter=caller.filter)
        return found, caller.sessionless
    if caller.key is not None:
        return await manager.get(caller.key, document_filter=caller.filter, owner=caller.owner), False
    return await manager.create_handle(document_filter=caller.filter, owner=caller.owner), True


async def _runtime(ctx: Context) -> Runtime:
    server = ctx.mcp_server
    runtime = getattr(server, "runtime", None)
    if runtime is None:
        raise AnalysisError("This server has no mcp-analysis runtime attached.")
    return await runtime.ready()
