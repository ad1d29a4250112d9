"""Where the CLI writes: results to stdout, everything else (errors, progress) to stderr.

Text from documents and paths is untrusted: a title, a passage or a file name may hold terminal
control sequences (clear the screen, set the window title, write the clipboard with OSC 52). So
every string the consoles print, and every `escape`d one, has its control characters shown as
`\\x1b`-style escapes instead of sent to the terminal (`terminal_safe`); JSON output escapes
them by itself.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console
from rich.markup import escape as escape_markup

from mcp_analysis.text import escape_controls


def terminal_safe(text: str) -> str:
    """`text` with each control character a visible escape; a CRLF line end stays a line end."""
    return escape_controls(text.replace("\r\n", "\n"))


def escape(text: str) -> str:
    """Untrusted text for a rich markup string: markup escaped, control characters shown."""
    return escape_markup(terminal_safe(text))


def escape_line(text: str) -> str:
    """`escape` for text printed within one line (a path, a title, a reason): a newline in a file
    name is shown as `\\n`, so a name cannot forge a line of the report it is in."""
    return escape_markup(terminal_safe(text).replace("\n", "\\n"))


def for_stream(text: str, stream: Any) -> str:
    """A program's own output (`exec`) as written: exact into a pipe or a file, `terminal_safe` on a terminal."""
    return terminal_safe(text) if stream.isatty() else text


class _SafeConsole(Console):
    def print(self, *objects: Any, **options: Any) -> None:  # type: ignore[override]
        super().print(*(terminal_safe(o) if isinstance(o, str) else o for o in objects), **options)


out = _SafeConsole(soft_wrap=True)
err = _SafeConsole(stderr=True, soft_wrap=True)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")
