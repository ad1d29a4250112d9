"""A quicker GIL hand-off while the server starts its search stack in threads.

The runtime imports LanceDB and loads the embedder in worker threads so the event loop can
answer `initialize` and `tools/list` meanwhile. But those threads hold the GIL nearly all the
time, and CPython hands it over only when the holder blocks or every switch interval (5 ms by
default): each time the loop wakes for a message, it waits up to 5 ms before it may run. While
the start-up work runs, the interval is 0.5 ms, so a message waits at most that long; the work
in the threads is unchanged (a hand-off costs microseconds). The previous interval is restored
when the last start-up phase ends; phases may overlap (a runtime that restarts while another
phase runs), so they are counted.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

STARTING_INTERVAL_S = 0.0005

_lock = threading.Lock()
_depth = 0
_previous: float | None = None  # the interval to put back, if we changed it


@contextmanager
def quick_handoff() -> Iterator[None]:
    """The GIL changes hands within 0.5 ms while the block runs (and any other such block).

    A program that set a shorter interval itself keeps it untouched."""
    global _depth, _previous
    with _lock:
        if _depth == 0:
            current = sys.getswitchinterval()
            _previous = current if current > STARTING_INTERVAL_S else None
            if _previous is not None:
                sys.setswitchinterval(STARTING_INTERVAL_S)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _previous is not None:
                sys.setswitchinterval(_previous)
                _previous = None
