"""Bounded capture of sandbox prints (they must never reach the server's stdout).

Output past a cap keeps its head and its tail: the first lines say what the code set out
to do, the last ones usually hold the result or the error. A marker in the middle says how
much is missing and how to get it.
"""

from __future__ import annotations

from typing import Literal

from mcp_analysis.text import MARKER, TAIL_SHARE

NOT_KEPT = "not kept (sandbox.max_output_chars); print less, or summarize in code"


class _Stream:
    """One stream's head (first `room` characters) and a rolling tail of the last `room // 3`."""

    def __init__(self, room: int) -> None:
        self.head_room = room - room // TAIL_SHARE
        self.tail_room = room // TAIL_SHARE
        self.head: list[str] = []
        self.head_chars = 0
        self.tail = ""
        self.total = 0

    def add(self, text: str) -> None:
        self.total += len(text)
        if self.head_chars < self.head_room:
            piece = text[: self.head_room - self.head_chars]
            self.head.append(piece)
            self.head_chars += len(piece)
            text = text[len(piece) :]
        if text and self.tail_room:
            self.tail = (self.tail + text)[-self.tail_room :]

    @property
    def kept(self) -> int:
        return self.head_chars + len(self.tail)

    def render(self) -> str:
        head = "".join(self.head)
        dropped = self.total - self.kept
        if dropped <= 0:
            return head + self.tail
        return head + MARKER.format(dropped=dropped, how=NOT_KEPT) + self.tail


class OutputCollector:
    """A monty print callback keeping at most `limit` characters of stdout (and a fifth of
    that of stderr, budgeted separately so warnings printed last are not lost to a flood),
    each as head + tail."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._streams = {"stdout": _Stream(limit), "stderr": _Stream(max(1000, limit // 5))}

    def __call__(self, stream: Literal["stdout", "stderr"], text: str) -> None:
        self._streams["stderr" if stream == "stderr" else "stdout"].add(text)

    @property
    def total(self) -> int:
        return sum(s.total for s in self._streams.values())

    @property
    def kept(self) -> int:
        return sum(s.kept for s in self._streams.values())

    @property
    def truncated(self) -> bool:
        return self.total > self.kept

    def render(self) -> tuple[str, str]:
        return self._streams["stdout"].render(), self._streams["stderr"].render()
