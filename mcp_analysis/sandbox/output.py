"""Bounded capture of sandbox prints (they must never reach the server's stdout)."""

from __future__ import annotations

from typing import Literal

MARKER = "\n... [output truncated: {dropped} more characters not shown; print less or summarize in code] ...\n"


class OutputCollector:
    """A monty print callback keeping at most `limit` characters of stdout (and a fifth of
    that of stderr, budgeted separately so warnings printed last are not lost to a flood)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self._room = {"stdout": limit, "stderr": max(1000, limit // 5)}
        self.kept = 0
        self.total = 0

    def __call__(self, stream: Literal["stdout", "stderr"], text: str) -> None:
        self.total += len(text)
        key = "stderr" if stream == "stderr" else "stdout"
        room = self._room[key]
        if room <= 0:
            return
        piece = text[:room]
        self._room[key] -= len(piece)
        self.kept += len(piece)
        (self.stderr if key == "stderr" else self.stdout).append(piece)

    @property
    def truncated(self) -> bool:
        return self.total > self.kept

    def render(self) -> tuple[str, str]:
        out, err = "".join(self.stdout), "".join(self.stderr)
        if self.truncated:
            note = MARKER.format(dropped=self.total - self.kept)
            if self.stdout or not self.stderr:
                out += note
            else:
                err += note
        return out, err


def truncate(text: str, limit: int) -> tuple[str, bool]:
    """Cut `text` to `limit` characters with a visible marker."""
    if len(text) <= limit:
        return text, False
    return text[:limit] + MARKER.format(dropped=len(text) - limit), True
