"""What one host call may take from the sandbox and give back to it.

Host functions (``statistics.*``, ``search``, ``list_documents``, the /documents
file system) run in the server process. Without bounds one call could make the
server build and ship a value far larger than the sandbox itself may hold
(``statistics.quantiles(data, n=20_000_000)`` would build 20 M floats on the host and
a 298 MB frame the worker refuses). Sizes are counted in *values* (one per
number, list item, dict entry, plus one per 16 characters of text) and derived
from ``sandbox.max_memory_mb``, so a session's memory limit also limits what the
host does for it. An over-limit call raises a clear error inside the sandbox;
the server and the session are unaffected.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mcp_analysis.sandbox.settings import SandboxSettings

VALUES_PER_MB = 4096  # values one host call may accept or return per MB of sandbox.max_memory_mb
TEXT_CHARS_PER_MB = 256 * 1024  # characters of one file read per MB of sandbox.max_memory_mb
MAX_PATH_CHARS = 4096  # PATH_MAX
MAX_NUMBER_BITS = 1024  # statistics take ints within a float's range (< 2**1024, ~1.8e308: 309 digits)


class HostLimitError(ValueError):
    """A host call's arguments or result exceed what the session's limits allow."""


@dataclass(frozen=True)
class HostBounds:
    max_values: int
    max_text_chars: int
    memory_mb: int

    @classmethod
    def of(cls, settings: SandboxSettings) -> HostBounds:
        mb = settings.max_memory_mb
        return cls(max_values=mb * VALUES_PER_MB, max_text_chars=mb * TEXT_CHARS_PER_MB, memory_mb=mb)

    @property
    def setting(self) -> str:
        return f"sandbox.max_memory_mb={self.memory_mb}"

    def check_arguments(self, call: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
        total = 0
        for argument in (*args, *kwargs.values()):
            total += count_values(argument, self.max_values - total)
            if total > self.max_values:
                break
        if total > self.max_values:
            raise HostLimitError(
                f"{call}(): the arguments hold more than {self.max_values:,} values, the most one host call may "
                f"take ({self.setting}). Aggregate in smaller pieces, or compute it in plain Python."
            )

    def check_result(self, call: str, value: Any) -> None:
        if count_values(value, self.max_values) > self.max_values:
            raise HostLimitError(
                f"{call}(): the result would hold more than {self.max_values:,} values, the most one host call "
                f"may return ({self.setting}). Ask for less (offset/limit, a smaller n)."
            )

    def check_numbers(self, call: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
        """Refuse ints beyond a float's range: big-int arithmetic holds the GIL (one 8.5-million-digit
        int would stall the server's event loop for 15 s, and go on computing after the call timed out).
        Call after `check_arguments`, which bounds this walk."""
        stack: list[Any] = [args, list(kwargs.values())]
        while stack:
            item = stack.pop()
            if isinstance(item, int) and not isinstance(item, bool) and item.bit_length() > MAX_NUMBER_BITS:
                digits = int(item.bit_length() * 0.30103) + 1
                raise HostLimitError(
                    f"{call}(): a number of about {digits:,} digits is too large; host statistics take numbers "
                    "of at most 309 digits (a float's range, about 1.8e308). Scale the numbers down first."
                )
            if isinstance(item, Mapping):
                stack.extend(item.values())
            elif isinstance(item, list | tuple | set | frozenset):
                stack.extend(item)

    def check_count(self, call: str, count: int) -> None:
        """Refuse before computing when a call would return `count` values."""
        if count > self.max_values:
            raise HostLimitError(
                f"{call}(): it would return {count:,} values; one host call may return at most "
                f"{self.max_values:,} ({self.setting})."
            )

    def check_text(self, path: str, text: str) -> None:
        if len(text) > self.max_text_chars:
            raise OSError(
                f"[Errno 27] File too large: '{path}' holds {len(text):,} characters, more than one read may bring "
                f"into the sandbox ({self.max_text_chars:,}, {self.setting}). Read items.jsonl item by item, "
                "or search() for the part you need."
            )


def check_path(path: str) -> None:
    if len(path) > MAX_PATH_CHARS:
        raise OSError(
            f"[Errno 36] File name too long: '{path[:60]}...' ({len(path):,} characters; at most {MAX_PATH_CHARS:,})"
        )


def count_values(value: Any, limit: int) -> int:
    """How many values `value` holds (stops counting once past `limit`).

    One per number or text (plus one per 16 characters) and one per container inside `value`;
    `value` itself, when a container, is not counted: a list of n numbers holds n values."""
    total = -1 if isinstance(value, Mapping | list | tuple | set | frozenset) else 0
    stack = [value]
    while stack:
        item = stack.pop()
        total += 1
        if isinstance(item, str | bytes | bytearray):
            total += len(item) // 16
        elif isinstance(item, int) and not isinstance(item, bool):
            total += item.bit_length() // 1024
        elif isinstance(item, Mapping | list | tuple | set | frozenset):
            if total + len(item) > limit:  # decided without walking a huge container
                return total + len(item)
            if isinstance(item, Mapping):
                stack.extend(item.keys())
                stack.extend(item.values())
            else:
                stack.extend(item)
        if total > limit:
            return total
    return total
