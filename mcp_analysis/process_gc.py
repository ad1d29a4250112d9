"""Garbage collection around a serving process's start-up imports.

Importing the MCP SDK and then the search stack makes ~170,000 objects that live as long as
the process. CPython's collector runs a few hundred collections while they are made, the
full ones scanning every object so far, and every later full collection scans them again,
pausing whatever call is running. In a process the server owns (`mcp-analysis serve`),
collection is paused while those imports run and the objects they made are then frozen
(`gc.freeze`: moved to a permanent generation that collections skip). Each phase does this
once per process: a runtime that starts again later (an HTTP server whose last client left)
must not freeze the sessions made since. A library user's process (`create_server` in their
own program) is left alone: a freeze would pin their objects too.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

Phase = Literal["server", "runtime"]

_pending: set[str] = set()


def own_process() -> None:
    """This process is a server we run: its start-up imports may pause and freeze collection."""
    _pending.update(("server", "runtime"))


@contextmanager
def imports_paused(phase: Phase) -> Iterator[None]:
    """No collection while the block imports; what exists after it is frozen (once per phase)."""
    if phase not in _pending or not gc.isenabled():
        yield
        return
    _pending.discard(phase)
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()
