"""The paths `add`, `sync` and a folder watcher never read as documents, each with its reason.

The server's own files: the knowledge base's folder (its files change with every write, so a
watcher following them would re-add them forever), the configuration file in use and the
bearer tokens file (they hold `sessions.secret`, encryption keys, tokens, a Redis URL with its
password), and the sessions folder (hibernated sessions). One list for every way in, so no
reader special-cases one of them; one that lies inside a folder being added or watched is
named in a warning on stderr. Which paths the settings make the server's own: own_files.py.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from mcp_analysis.paths import resolve_links

log = logging.getLogger(__name__)

OWN_FOLDER = "the knowledge base's own folder"


def _folder_files(entries: Iterable[tuple[Path, str]]) -> dict[tuple[int, int], str]:
    """(device, inode) -> why, of the files with more than one name under the folders among `entries`
    (no link followed)."""
    found: dict[tuple[int, int], str] = {}
    for top, why in entries:
        for folder, _, names in os.walk(top):  # links not followed; a folder it cannot list is passed over
            for name in names:
                try:
                    st = Path(folder, name).lstat()
                except OSError:  # gone meanwhile
                    continue
                if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:  # only a file with other names can be read elsewhere
                    found[(st.st_dev, st.st_ino)] = why
    return found


def real_path(path: str | os.PathLike[str]) -> Path:
    """`path` with ~ expanded and every link resolved: how entries and paths are compared."""
    return Path(resolve_links(Path(path).expanduser()))


@dataclass(frozen=True)
class Excluded:
    """Real paths (a folder covers everything under it) and why each is never read."""

    entries: tuple[tuple[Path, str], ...] = ()
    files: tuple[tuple[int, int, str], ...] = ()  # (device, inode, why) of the files among them

    def same_file_as(self, device: int, inode: int, links: int = 1) -> str | None:
        """Why the file with this identity is never read (a hard link to one of them is one), else None.
        `links`: its number of names; above one it may be a file under one of the folders too (a
        hibernated session's record linked into a watched folder)."""
        found = next((why for dev, ino, why in self.files if (dev, ino) == (device, inode)), None)
        if found is not None or links <= 1:
            return found
        return self._linked_in_folders.get((device, inode))

    @cached_property
    def _linked_in_folders(self) -> dict[tuple[int, int], str]:
        """`_folder_files` of the entries, listed once, when a file with other names is first read
        (an Excluded lives for one add)."""
        return _folder_files(self.entries)

    def why(self, path: str | os.PathLike[str]) -> str | None:
        """The reason `path` (resolved: a link to one of them is one of them) is never read, else None."""
        return self.covers(real_path(path))

    def covers(self, real: Path) -> str | None:
        """`why` for a path known to be real (no link in it), without resolving it again."""
        for where, reason in self.entries:
            if real == where or real.is_relative_to(where):
                return reason
        return None

    def warn_inside(self, folders: Iterable[str | os.PathLike[str]], doing: str) -> None:
        """Name, on stderr, each entry inside one of `folders` (`doing`: "added", "watched")."""
        reals = [real_path(f) for f in folders]
        for where, reason in self.entries:
            folder = next((f for f in reals if where != f and where.is_relative_to(f)), None)
            if folder is not None:
                log.warning(
                    "%s lies inside the %s folder %s: it is %s, never read as a document", where, doing, folder, reason
                )
