"""Files moved or renamed since they were added: the same document at its new place.

A file met at a new path whose bytes (sha256) are those of a stored document whose own file is
gone is that document moved: its uri, file name and (when it was the old name) title are
updated, and its id, chunks, vectors and tables are kept. Converting and embedding it again
(OCR for a scan) would cost minutes for a renamed folder of large files, and would change the
ids that citations and a client's variables hold. A copy (the old file still there) is a new
document as before; so is a document whose source is not a local file.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path, PurePath
from typing import Any
from urllib.parse import unquote_to_bytes, urlsplit

from mcp_analysis.ingest.files import display_name
from mcp_analysis.store.models import DocumentMeta


def local_path(uri: str) -> str | None:
    """The path a file:// uri names (every byte of the name, as `file_uri` encoded it), else None."""
    parts = urlsplit(uri)
    if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
        return None
    return os.fsdecode(unquote_to_bytes(parts.path))


class MovedFiles:
    """The stored documents a new file may be, by content hash; each claimed at most once, and the
    claimed ones at their new places (`relocated`, for the caller to write in one commit)."""

    def __init__(self, documents: Iterable[DocumentMeta]) -> None:
        self.relocated: list[DocumentMeta] = []
        self._by_hash: dict[str, list[DocumentMeta]] = {}
        for meta in documents:
            if meta.content_hash and local_path(meta.uri) is not None:
                self._by_hash.setdefault(meta.content_hash, []).append(meta)

    def claim(self, digest: str) -> DocumentMeta | None:
        """A stored document with these bytes whose file no longer exists (checked now), if any."""
        for meta in self._by_hash.get(digest, []):
            path = local_path(meta.uri)
            if path is not None and not os.path.lexists(path):
                self._by_hash[digest].remove(meta)
                return meta
        return None

    def relocate(
        self, meta: DocumentMeta, path: Path, uri: str, title: str | None, metadata: dict[str, Any]
    ) -> DocumentMeta:
        """`meta` at its new place, kept in `relocated`."""
        self.relocated.append(relocated(meta, path, uri, title, metadata))
        return self.relocated[-1]


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
