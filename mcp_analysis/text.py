"""Text cut to fit a result: labels (titles, headings, uris) and clipped output, errors, fields.

A leaf: what search, the sandbox, the session, tooling and the server all cut text with.
Output past a cap keeps its head and its tail: the first lines say what was set out to do,
the last ones usually hold the result or the error; a marker in the middle says how much is
missing and how to get it.
"""

from __future__ import annotations

import re

ELLIPSIS = "…"
MARKER = "\n… [output truncated: {dropped:,} characters {how}] …\n"
TAIL_SHARE = 3  # a third of the room goes to the tail


def clip(text: str, limit: int, how: str) -> tuple[str, bool]:
    """`text` in at most `limit` characters: head, a marker saying what is missing and `how` to get it, tail."""
    if len(text) <= limit:
        return text, False
    marker = MARKER.format(dropped=len(text), how=how)  # an upper bound of the marker's length
    room = max(0, limit - len(marker))
    tail = room // TAIL_SHARE
    head = room - tail
    dropped = len(text) - head - tail
    middle = MARKER.format(dropped=dropped, how=how)
    return text[:head] + middle + (text[len(text) - tail :] if tail else ""), True


LABEL_CHARS = 120  # a title, heading or echoed query as a tool result shows it


def label(text: str, limit: int = LABEL_CHARS) -> str:
    """`text` in at most `limit` characters, ending in … when cut.

    Titles, headings and uris come from documents (untrusted: a 50,000-character heading is
    one line of markdown) and must never crowd the passages out of a tool result."""
    return text if len(text) <= limit else text[: limit - 1] + ELLIPSIS


def label_path(headings: list[str], limit: int = 2 * LABEL_CHARS) -> list[str]:
    """A section path within about `limit` characters: the innermost headings, each cut to a label."""
    shown: list[str] = []
    size = 0
    for heading in reversed(headings):
        cut = label(heading, max(20, min(LABEL_CHARS, limit - size)))
        if shown and size + len(cut) > limit:
            shown.append(ELLIPSIS)
            break
        shown.append(cut)
        size += len(cut)
    return shown[::-1]


def shared_dir(uris: list[str]) -> str:
    """The directory part all `uris` share, when it is long enough (16+) to be worth saying once;
    empty for fewer than two."""
    if len(uris) < 2:
        return ""
    prefix = uris[0][: uris[0].rfind("/") + 1]
    for uri in uris[1:]:
        while prefix and not uri.startswith(prefix):
            prefix = prefix[: prefix.rstrip("/").rfind("/") + 1]
    return prefix if len(prefix) >= 16 else ""


def summary_line(text: str, limit: int = 300) -> str:
    """A message on one line: its first line and, when it goes on, its last, where a traceback
    puts the cause (Ray's "Initialization failure from server:" ends its first line in a colon)."""
    lines = [" ".join(line.split()) for line in text.splitlines()]
    lines = [line[:limit] for line in lines if line]
    if not lines:
        return ""
    return lines[0] if len(lines) == 1 else f"{lines[0]} {lines[-1]}"


# C0 controls but tab (and newline unless asked), DEL, and C1 controls (0x9b is an 8-bit CSI on some terminals).
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_CONTROLS_AND_NEWLINES = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")


def escape_controls(text: str, *, newlines: bool = False) -> str:
    """`text` with each control character shown as a `\\x1b`-style escape (newlines too if `newlines`):
    untrusted text (a file name, a title) can then neither drive a terminal nor start a line of its own."""
    pattern = _CONTROLS_AND_NEWLINES if newlines else _CONTROLS
    return pattern.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
