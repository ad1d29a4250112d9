"""Waiting on a watcher: every wait is a poll against a deadline, never a fixed sleep."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

DEADLINE = 90.0  # seconds; generous for a loaded machine, only reached when something is broken

T = TypeVar("T")


async def eventually(check: Callable[[], Awaitable[T]], what: str, seconds: float = DEADLINE) -> T:
    """Poll `check` until it returns something true, and return that; fail naming `what` at the deadline."""
    try:
        with anyio.fail_after(seconds):
            while True:
                value = await check()
                if value:
                    return value
                await anyio.sleep(0.2)
    except TimeoutError:
        raise AssertionError(f"not within {seconds:g} s: {what}") from None
