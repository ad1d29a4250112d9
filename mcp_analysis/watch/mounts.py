"""Mount points inside the followed folders: a share unmounted is no folder emptied.

A network share or a disk mounted on a folder under a synced or watched one, once unmounted, leaves an
empty folder: mirrored as it is, every document of the share would be removed, and come back under
new ids (citations and sessions that named them lose them) when it is mounted again. So a folder
known as a mount point that exists, empty, with nothing mounted on it keeps its documents until
something is mounted there again. Known: mounted when a sync or watcher looked
(`/proc/self/mountinfo`), or declared in `/etc/fstab`. What was seen is remembered in the data
home (`mount-points.json`), so the next `sync` (a cron job, a new process) knows it too; a mount
point whose folder is gone, or holds files of its own again (hidden ones aside), is forgotten. A
watcher also compares what is mounted under its folders at each check of the folders themselves: a
share mounted or unmounted there is watched anew and mirrored.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from mcp_analysis.paths import data_home

log = logging.getLogger(__name__)

MOUNTINFO = Path("/proc/self/mountinfo")
FSTAB = Path("/etc/fstab")
MEMORY_NAME = "mount-points.json"
MAX_REMEMBERED = 10_000  # mount points under followed folders, in all: a real machine has tens
_ESCAPE = re.compile(r"\\([0-7]{3})")  # both files write a space in a path as \040


def _unescape(field: str) -> str:
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), field)


def _fields(path: Path, column: int) -> Iterator[str]:
    """The `column`th whitespace-separated field of each line that is no comment; nothing if unreadable."""
    try:
        text = path.read_text(encoding="utf-8", errors="surrogateescape")
    except OSError:
        return
    for line in text.splitlines():
        parts = line.split()
        if len(parts) > column and not parts[0].startswith("#"):
            yield _unescape(parts[column])


def mounted_now() -> set[Path]:
    """Every mount point of this process's view (Linux; empty elsewhere)."""
    return {Path(p) for p in _fields(MOUNTINFO, 4)}


def declared() -> set[Path]:
    """The mount points /etc/fstab declares, mounted or not (swap and pseudo entries left out)."""
    return {Path(p) for p in _fields(FSTAB, 1) if p.startswith("/")}


class MountPoints:
    """The mount points under `folders` (the folders themselves excluded: the mirror watches those)."""

    def __init__(self, folders: Iterable[Path], memory: Path | None = None) -> None:
        self.folders = tuple(folders)
        self.memory = memory if memory is not None else data_home() / MEMORY_NAME
        self.known: set[Path] = {p for p in self._recalled() if self._within(p)}

    def unmounted(self, scopes: Iterable[Path]) -> list[Path]:
        """Look again (what is mounted now joins the known), then the known mount points at, under or
        above one of `scopes` that exist, empty, with nothing mounted on them."""
        now = mounted_now()
        seen = {p for p in now | declared() if self._within(p)}
        before = set(self.known)
        self.known |= seen
        scopes = tuple(scopes)
        found = []
        for point in sorted(self.known):
            if not any(point.is_relative_to(s) or s.is_relative_to(point) for s in scopes):
                continue
            # a bind mount within one file system is a mount point os.path.ismount misses
            if point in now if now else os.path.ismount(point):
                continue
            if _empty_folder(point):
                found.append(point)
            else:  # gone, a file or a link now, or holding files again: no mount point of ours
                self.known.discard(point)
        if self.known != before:
            self._remember()
        return found

    def mounted(self) -> set[Path]:
        """The mount points under the folders with something mounted on them now (a watcher compares
        these between its checks: its OS watches went with a share unmounted, and one mounted again
        needs new ones)."""
        return {p for p in mounted_now() if self._within(p)}

    def _within(self, point: Path) -> bool:
        return any(point != f and point.is_relative_to(f) for f in self.folders)

    def _recalled(self) -> set[Path]:
        try:
            saved = json.loads(self.memory.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):  # unreadable or corrupt: nothing remembered
            return set()
        return {Path(p) for p in saved if isinstance(p, str)} if isinstance(saved, list) else set()

    def _remember(self) -> None:
        """Save the known mount points with those other folders' syncs remembered (best effort)."""
        others = {p for p in self._recalled() if not self._within(p)}
        points = sorted(str(p) for p in others | self.known)[:MAX_REMEMBERED]
        try:
            self.memory.parent.mkdir(parents=True, exist_ok=True)
            temporary = self.memory.with_name(f".{self.memory.name}.{os.getpid()}")
            temporary.write_text(json.dumps(points), encoding="utf-8")
            temporary.replace(self.memory)
        except OSError as exc:
            log.warning("Cannot remember the mount points under the followed folders in %s: %s", self.memory, exc)


def _empty_folder(path: Path) -> bool:
    """Whether `path` is a folder (no link) with nothing in it but hidden entries (a `.not-mounted`
    marker is a common way to tell a share is missing). One that cannot be listed is not: the mirror
    keeps its documents as it keeps any unreadable folder's."""
    try:
        if path.is_symlink() or not path.is_dir():
            return False
        with os.scandir(path) as entries:
            return all(entry.name.startswith(".") for entry in entries)
    except OSError:
        return False
