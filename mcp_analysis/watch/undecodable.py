"""Files whose names are not UTF-8: the OS watcher (watchfiles) cannot report their events.

watchfiles fails the whole batch of events when one path in it is not UTF-8, and reading such
a file is itself an event (an access), so mirroring it again would fail the next batch, for
ever. The watcher notes each such file here (its name from the error message); the mirror
then reads it only when its size or mtime changed since it last read it, so each change of
it costs one more round and the rounds end.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

_MESSAGE = re.compile(r'decode path "(.*)" to string', re.DOTALL)
_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{2}|u\{[0-9a-fA-F]{1,6}\}|.)", re.DOTALL)
_SIMPLE = {"n": b"\n", "t": b"\t", "r": b"\r", "0": b"\0", "\\": b"\\", '"': b'"', "'": b"'"}


def path_in_error(message: str) -> Path | None:
    """The path in watchfiles' 'Unable to decode path "..." to string' (Rust's debug quoting undone)."""
    found = _MESSAGE.search(message)
    if found is None:
        return None
    raw, out, at = found.group(1), bytearray(), 0
    for escape in _ESCAPE.finditer(raw):
        out += raw[at : escape.start()].encode("utf-8")
        code = escape.group(1)
        if code.startswith("x") and len(code) == 3:
            out.append(int(code[1:], 16))
        elif code.startswith("u{"):
            out += chr(int(code[2:-1], 16)).encode("utf-8")
        else:
            out += _SIMPLE.get(code, code.encode("utf-8"))
        at = escape.end()
    out += raw[at:].encode("utf-8")
    return Path(os.fsdecode(bytes(out)))


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return (stat.st_size, stat.st_mtime_ns)


class UndecodableNames:
    """The files the watcher cannot report, and their size and mtime when last read."""

    def __init__(self) -> None:
        self._read_at: dict[Path, tuple[int, int] | None] = {}

    def note(self, path: Path) -> None:
        """`path` could not be reported: read it at the next round unless it was read as it is now."""
        self._read_at.setdefault(path, None)

    def unchanged(self, path: Path) -> bool:
        """True for a noted file unchanged since it was read (leave it be); records a read otherwise."""
        if path not in self._read_at:
            return False
        now = _stamp(path)
        if now is not None and self._read_at[path] == now:
            return True
        self._read_at[path] = now
        return False
