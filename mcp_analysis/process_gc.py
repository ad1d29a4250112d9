"""Garbage collection around a serving process's start-up imports, and the heap a load leaves.

Importing the MCP SDK and then the search stack makes over 100,000 objects, nearly all of them
modules, classes and functions kept for the life of the process. CPython's collector runs a
few hundred collections while they are made (~0.2 s of a start on the benchmark VM), and
every later full collection scans them again, pausing whatever call is running. In a process
the server owns (`mcp-analysis serve`), collection is paused while those imports run; then one
collection of the youngest generation (which, collection being paused, holds everything made
meanwhile) frees the cycles that died, and what is left is frozen (`gc.freeze`: moved to a
permanent generation that collections skip). Frozen objects are still freed when their last
reference goes; only a cycle among them that dies later is never collected.

A load that builds much and keeps little (onnxruntime folding a model's int8 weights into
fp32 ones) leaves freed memory in the C heap that glibc keeps for the process: `trim_heap`
hands it back (after the exact MiniLM variant's load: 63 MB of an idle server's RSS, bench/idle_memory.py).

Each phase does this once per process: a runtime that starts again later (an HTTP server
whose last client left) must not freeze the sessions made since. A library user's process
(`create_server` in their own program) is left alone: a freeze would pin their objects too.
"""

from __future__ import annotations

import ctypes
import gc
import sys
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
    """No collection while the block imports; its dead cycles freed and the rest frozen after.

    Once per phase, whatever happens: a phase entered while collection is off (someone else
    turned it off) is spent without pausing or freezing anything."""
    if phase not in _pending:
        yield
        return
    _pending.discard(phase)
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.collect(0)
        gc.freeze()
        gc.enable()


def trim_heap() -> bool:
    """Return the C heap's free memory to the system (glibc's ``malloc_trim``); False where there is none
    (another C library, another system): the memory then stays with the process, as it did."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        # The process's own symbols, libc's among them (find_library would start ldconfig).
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # musl and others have no malloc_trim
        return False
    trim.argtypes = [ctypes.c_size_t]
    trim(0)
    return True
