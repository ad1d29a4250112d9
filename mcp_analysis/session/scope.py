"""A call's scope: session locks taken while serving one call are released when it ends.

A front door opens one `call_scope` around each call that works on a session (the MCP
server: around each tool call and resource read); the session manager registers the
locks it takes in the current scope (`current_scope`). Light on purpose (no LanceDB or
monty imports): the server installs its middleware before the runtime has loaded anything.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import anyio


@dataclass
class CallScope:
    held: dict[str, str] = field(default_factory=dict)  # session key -> lock token
    releases: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    sessions: list[Any] = field(default_factory=list)  # live sessions this call holds


_SCOPE: ContextVar[CallScope | None] = ContextVar("mcp_analysis_call_scope", default=None)


def current_scope() -> CallScope | None:
    return _SCOPE.get()


@asynccontextmanager
async def call_scope() -> AsyncIterator[CallScope]:
    """Locks taken during the block are released when it ends, even on error or cancellation."""
    scope = CallScope()
    token = _SCOPE.set(scope)
    try:
        yield scope
    finally:
        _SCOPE.reset(token)
        with anyio.CancelScope(shield=True):
            for release in reversed(scope.releases):
                await release()
