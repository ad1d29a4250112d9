"""Files moved or renamed since they were added: the same document at its new place.

A file met at a new path whose bytes (sha256) and suffix are those of a stored document whose
own file is gone is that document moved: its uri, file name and (when it was the old name)
title are updated, and its id, chunks, vectors and tables are kept. Converting and embedding it
again (OCR for a scan) would cost minutes for a renamed folder of large files, and would change
the ids that citations and a client's variables hold. Of documents with the same bytes, the one
whose file had the same name is taken first (a renamed folder keeps each file's document).

Not a move, but read again: a copy (the old file still there, or not known to be gone: a file
that cannot be looked at counts as present; a hard link is a copy); a new suffix (the file may
be read differently now); a document whose conversion is named after its file (a CSV's table, a
workbook's or a source file's title); a document whose source is not a local file; and a
document whose file lay outside the folders being added or watched (`within`): a file:// uri
names no machine, so a knowledge base shared by several machines must not hand one machine's
document to another's file. A case-only rename on a case-insensitive disk is a move.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path, PurePath
from typing import Any
from urllib.parse import unquote_to_bytes, urlsplit
from urllib.request import url2pathname

from mcp_analysis.ingest import formats
from mcp_analysis.ingest.files import display_name
from mcp_analysis.paths import resolve_links
from mcp_analysis.store.models import DocumentMeta


def local_path(uri: str) -> str | None:
    """The path a file:// uri names (as `file_uri` encoded it: every byte of a POSIX name; a drive
    letter on Windows), else None."""
    parts = urlsplit(uri)
    if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
        return None
    if os.name == "nt":
        return url2pathname(parts.path)  # /C:/a%20b -> C:\\a b
    return os.fsdecode(unquote_to_bytes(parts.path))


def gone(path: str) -> bool:
    """The file is known not to exist here: a path that cannot be looked at (no permission, an I/O
    error) is not taken for gone. (A file under a volume not mounted now is: the folder rule of
    `MovedFiles` keeps that to the folders being added.) Blocks on a slow disk: call from a thread."""
    try:
        os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return True
    except (OSError, ValueError):
        return False
    return False


#: Converters that take the file's name into the content (a CSV's table, a workbook's title, a
#: source file's title and heading): a move would keep the old name there.
_NAMED_AFTER_THE_FILE = frozenset({"delimited", "spreadsheet", "code"})


def named_after_the_file(name: str) -> bool:
    """A file called `name` is converted with its name in the content (decided by the name, not by
    stored metadata, which `--meta` may overwrite)."""
    found = formats.find(name)
    converter = found.converter if found is not None else None
    return isinstance(converter, str) and converter.rsplit(".", 1)[-1] in _NAMED_AFTER_THE_FILE


def same_file(old: str, new: Path) -> bool:
    """`old` is `new` spelt in other letter cases (a case-only rename on a case-insensitive disk),
    not another name of it (a hard link: two names, two documents)."""
    if old.casefold() != resolve_links(new).casefold():
        return False
    try:
        return Path(old).samefile(new)
    except (OSError, ValueError):
        return False


class MovedFiles:
    """The stored documents a new file may be, by content hash; each claimed at most once, and the
    claimed ones at their new places (`relocated`, for the caller to write in one commit)."""

    def __init__(self, documents: Iterable[DocumentMeta], within: Sequence[Path]) -> None:
        """`within`: only documents whose file lay under one of these (resolved) folders may move."""
        self.relocated: list[DocumentMeta] = []
        self._by_hash: dict[str, list[tuple[DocumentMeta, str]]] = {}
        for meta in documents:
            path = local_path(meta.uri)
            if not meta.content_hash or path is None or named_after_the_file(PurePath(path).name):
                continue
            if not any(PurePath(path).is_relative_to(folder) for folder in within):
                continue
            self._by_hash.setdefault(meta.content_hash, []).append((meta, path))

    def claim(self, digest: str, path: Path) -> DocumentMeta | None:
        """A stored document with these bytes and `path`'s suffix whose file is gone (checked now)
        or is `path` spelt otherwise, one whose file had this very name first; None if there is
        none. Blocks on a slow disk: call from a thread."""
        name = path.name
        suffix = PurePath(name).suffix.lower()
        candidates = [c for c in self._by_hash.get(digest, []) if PurePath(c[1]).suffix.lower() == suffix]
        candidates.sort(key=lambda c: PurePath(c[1]).name != name)  # the same name first (a stable sort)
        for candidate in candidates:
            if gone(candidate[1]) or same_file(candidate[1], path):
                self._by_hash[digest].remove(candidate)
                return candidate[0]
        return None

    def relocate(
        self, meta: DocumentMeta, path: Path, uri: str, title: str | None, metadata: dict[str, Any]
    ) -> DocumentMeta:
        """`meta` at its new place, kept in `relocated` until taken."""
        self.relocated.append(relocated(meta, path, uri, title, metadata))
        return self.relocated[-1]

    def take(self) -> list[DocumentMeta]:
        """The documents relocated since the last take, to write."""
        taken, self.relocated = self.relocated, []
        return taken


def relocated(meta: DocumentMeta, path: Path, uri: str, title: str | None, metadata: dict[str, Any]) -> DocumentMeta:
    """`meta` at its new place; a title that was its old file name (no title inside) follows the name."""
    new_name = display_name(path.name)
    if title is None:
        old_name = display_name(PurePath(local_path(meta.uri) or "").name)
        title = _name_title(new_name) if meta.title == _name_title(old_name) else meta.title
    return meta.model_copy(
        update={
            "uri": uri,
            "title": title,
            "metadata": {**meta.metadata, "file_name": new_name, **metadata},
            "updated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
    )


def _name_title(name: str) -> str:
    """The title a file without one inside is given: its name without the suffix (as ingest does)."""
    return PurePath(name).stem or name
