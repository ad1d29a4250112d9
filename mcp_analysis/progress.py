"""Progress of slow steps (first-use builds, one-time model preparation) as plain lines on stderr.

A first run can take tens of seconds before anything else is printed; these lines say
what is happening. They go through the ``mcp_analysis.progress`` logger, which
`configure_logging` sends to stderr unprefixed at INFO even when other logging is at
WARNING (never to stdout: over stdio that is the MCP wire).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

from mcp_analysis.logging_setup import PROGRESS_LOGGER

log = logging.getLogger(PROGRESS_LOGGER)


def say(message: str, *args: object) -> None:
    log.info(message, *args)


@contextmanager
def step(message: str) -> Iterator[None]:
    """`message...` before a slow step and `message: done in N s` after it."""
    say("%s...", message)
    started = time.perf_counter()
    yield
    say("%s: done in %.1f s", message, time.perf_counter() - started)


class LineProgress:
    """An ingest `ProgressSink` that reports each file as one line (for logs and non-terminals)."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.total = 0
        self.done = 0

    def start(self, total: int) -> None:
        self.total = total

    def advance(self, label: str) -> None:
        self.done += 1
        say("%s: %d/%d %s", self.what, self.done, self.total, label)

    def phase(self, label: str) -> None:
        say("%s: %s", self.what, label)

    def finish(self) -> None:
        pass
