"""Which paths ingest reads, and how it reads one: regular files only, bytes read once, bounded.

- A directory is walked without following symbolic links: a link whose target lies outside the
  folders named is refused and reported under its own name; one inside is left to its target
  (read where it lies, if followed: never twice, never past hidden or excluded paths). A file
  or folder named on the command line that is itself a link is followed: the user chose it.
- The server's own files (excluded.py: the knowledge base, the config and tokens files, the
  sessions folder) are never read, named or met in a walk; secrets (secrets.py: private keys and
  credential files by name) are left out of a walk with a warning, and refused when named.
- Only regular files are opened, and never in a way that can block: `stat` first (a FIFO, device
  or socket is reported without being opened), then `open(O_NONBLOCK)` and `fstat` on the open
  descriptor (an entry swapped for a FIFO in between is caught there).
- A file is read once, in pieces, up to `ingest.max_file_mb`; the bytes read are hashed and are
  the bytes converted. Text formats are sniffed piece by piece: the first NUL byte stops the read.
- A file that changes while it is read (size, mtime or ctime moved) is refused, not stored half:
  its `FileSignature` taken before and after the read differ. A folder watcher uses the same
  signature to wait until a file is stable.
- Names are bytes on POSIX: a name that is not UTF-8 keeps its bytes in the uri (percent-encoded)
  and is shown with backslash escapes.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import stat
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from mcp_analysis.errors import IngestError
from mcp_analysis.ingest.excluded import Excluded
from mcp_analysis.ingest.formats.base import SNIFF_BYTES, limit_error
from mcp_analysis.ingest.limits import MB, Limits
from mcp_analysis.ingest.secrets import named_secret
from mcp_analysis.paths import resolve_links

log = logging.getLogger(__name__)

PIECE_BYTES = MB
_KINDS = {
    stat.S_IFIFO: "a named pipe",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a directory",
}


@dataclass(frozen=True)
class FileSignature:
    """What changes when a file's content does: equal signatures a moment apart mean a stable file."""

    device: int
    inode: int
    size: int
    mtime_ns: int
    ctime_ns: int

    @classmethod
    def of(cls, st: os.stat_result) -> FileSignature:
        return cls(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


@dataclass(frozen=True)
class ReadFile:
    data: bytes
    digest: str  # sha256 of exactly `data`
    signature: FileSignature


def display_name(path: str | os.PathLike[str]) -> str:
    """The path as printable text: bytes that are not UTF-8 shown as \\xNN escapes."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def file_uri(path: str | os.PathLike[str]) -> str:
    """file:// uri of the real path, every byte of the name kept (percent-encoded)."""
    return Path(resolve_links(path)).as_uri()


def not_regular(mode: int) -> str:
    kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
    return f"not a regular file ({kind}); only regular files are read"


def check_entry(path: str | os.PathLike[str]) -> str | None:
    """Why `path` cannot be read as a regular file (None if it can), without opening it."""
    try:
        st = Path(path).stat()
    except OSError as exc:
        return _unfollowable(path, exc)
    return None if stat.S_ISREG(st.st_mode) else not_regular(st.st_mode)


def _unfollowable(path: str | os.PathLike[str], exc: OSError) -> str:
    is_link = Path(path).is_symlink()
    reason = exc.strerror or str(exc)
    if is_link and exc.errno == errno.ELOOP:
        return f"a symbolic link that cannot be followed ({reason})"
    if is_link and exc.errno == errno.ENOENT:
        return f"a symbolic link whose target does not exist ({display_name(Path(path).readlink())})"
    if exc.errno == errno.ENOENT:
        return "does not exist"
    return f"cannot read: {reason}"


def read_file(path: str | os.PathLike[str], limits: Limits, text_after: Callable[[bytes], bool]) -> ReadFile:
    """The bytes of regular file `path`, read once and hashed; `text_after(head)` says whether the
    file is text (then a NUL byte anywhere refuses it)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise IngestError(_unfollowable(path, exc)) from exc
    try:
        before = os.fstat(fd)
        if not stat.S_ISREG(before.st_mode):
            raise IngestError(not_regular(before.st_mode))
        if before.st_size > limits.max_bytes:
            raise limit_error(limits, "max_bytes", f"{before.st_size / MB:,.0f} MB")
        data = read_pieces(lambda size: os.read(fd, size), limits, text_after)
        after = os.fstat(fd)
    except OSError as exc:
        raise IngestError(f"cannot read: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)
    signature = FileSignature.of(before)
    if FileSignature.of(after) != signature:
        raise IngestError("it changed while it was being read (still being written?); add it again once it is saved")
    if len(data) != before.st_size:  # unchanged, yet not the size it reports: made up as it is read
        raise IngestError(
            f"it reports {before.st_size:,} bytes but reads as {len(data):,}: the system generates it as it is read "
            "(like the files under /proc and /sys), it is not a saved document; copy it to a file to add it"
        )
    return ReadFile(data, hashlib.sha256(data).hexdigest(), signature)


def read_pieces(read: Callable[[int], bytes], limits: Limits, text_after: Callable[[bytes], bool]) -> bytes:
    """All that `read(size)` gives, in pieces, up to `limits.max_bytes`; a text's NUL byte refuses it."""
    buffer = bytearray()
    head = read(SNIFF_BYTES)
    text = text_after(head)
    piece = head
    while piece:
        if text and b"\x00" in piece:
            offset = len(buffer) + piece.index(b"\x00")
            raise IngestError(f"looks like a binary file, not text (a NUL byte at byte {offset:,})")
        buffer += piece
        if len(buffer) > limits.max_bytes:
            raise limit_error(limits, "max_bytes", "it grew while being read to more")
        piece = read(PIECE_BYTES)
    return bytes(buffer)


def inside(path: str | os.PathLike[str], folder: Path | None) -> bool:
    """`path` (resolved) is `folder` or lies under it."""
    if folder is None:
        return False
    real = Path(resolve_links(path))
    return real == folder or real.is_relative_to(folder)


def link_out(link: str | os.PathLike[str], scopes: Sequence[Path]) -> str | None:
    """Why the symbolic link `link`, met in a folder, is refused: its target lies outside every
    folder of `scopes` (real paths). None for a link inside them (never read through either: its
    target is read where it lies, if followed) and for a dangling or looping one. One whose target
    cannot be looked at (a name too long, a folder not searchable) is refused too: it is never read."""
    try:
        if not Path(link).exists():
            return None
        target = resolve_links(link)
    except OSError as exc:
        return f"a symbolic link whose target cannot be looked at ({exc.strerror or exc}): not followed"
    if any(inside(target, scope) for scope in scopes):
        return None
    kind = "folder" if Path(target).is_dir() else "file"
    return (
        f"a symbolic link to a {kind} outside the folders added or watched ({display_name(target)}): "
        "not followed (links out of a folder are never read)"
    )


def same_file(path: str | os.PathLike[str], read: FileSignature) -> bool:
    """`path` itself (not a link) is the regular file that was read: an entry swapped for a link
    between the walk and the read is caught here."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and (st.st_dev, st.st_ino) == (read.device, read.inode)


def collect_files(paths: Sequence[Path], excluded: Excluded | None = None) -> tuple[list[Path], list[tuple[str, str]]]:
    """Files to ingest, as named (directories walked recursively, hidden entries, the paths
    `excluded` and symbolic links skipped: a link out of the folders named is reported), and the
    arguments or entries that give nothing to add. Entries are checked one by one later (`check_entry`)."""
    excluded = excluded or Excluded()
    files: list[Path] = []
    skipped: list[tuple[str, str]] = []
    given = [Path(raw).expanduser().absolute() for raw in paths]
    scopes = [Path(resolve_links(p)) for p in given if p.is_dir()]
    excluded.warn_inside(scopes, "added")
    for path in given:
        if not os.path.lexists(path):
            skipped.append((display_name(path), "does not exist"))
        elif (reason := excluded.why(path)) is not None:
            skipped.append((display_name(path), f"is {reason}, never added as documents"))
        elif not path.is_dir() and (secret := named_secret(path)) is not None:
            skipped.append((display_name(path), f"is {secret}: secrets are never added as documents"))
        elif path.is_dir():
            found = len(files)
            files.extend(walk(path, skipped, excluded, scopes))
            if len(files) == found:
                skipped.append((display_name(path), "no files in this directory (hidden files are not added)"))
        else:
            files.append(path)
    seen: set[str] = set()
    unique: list[Path] = []
    for path in files:  # the same file named twice is added once
        real = resolve_links(path)
        if real not in seen:
            seen.add(real)
            unique.append(path)
    return unique, skipped


def walk(
    top: Path, skipped: list[tuple[str, str]], excluded: Excluded | None = None, scopes: Sequence[Path] = ()
) -> Iterator[Path]:
    """The non-hidden entries under `top` that are not directories, each directory's own entries
    first, in name order. Iterative (a tree thousands of levels deep is no recursion problem);
    the paths `excluded` are not entered; symbolic links are never followed: one whose target
    lies outside `top` and `scopes` is reported in `skipped`, one inside left to its target, a
    dangling or looping one yielded (reported by `check_entry`). An unreadable directory is
    reported in `skipped`."""
    excluded = excluded or Excluded()
    real_top = Path(resolve_links(top))
    scopes = [real_top, *scopes]
    pending = [(top, real_top)]  # no link is entered, so an entry's real path is its folder's plus its name
    while pending:
        directory, real = pending.pop()
        try:
            with os.scandir(directory) as listing:
                entries = sorted((e for e in listing if not e.name.startswith(".")), key=lambda e: e.name)
        except OSError as exc:
            skipped.append((display_name(directory), f"cannot read this directory: {exc.strerror or exc}"))
            continue
        subdirectories = []
        for entry in entries:
            if entry.is_symlink() and (own := excluded.why(entry.path)) is not None:
                log.warning("%s links to %s: never read as a document", display_name(entry.path), own)
            elif entry.is_symlink():
                reason = link_out(entry.path, scopes)
                if reason is not None:
                    skipped.append((display_name(entry.path), reason))
                elif not Path(entry.path).exists():
                    yield Path(entry.path)
            elif excluded.covers(real / entry.name) is not None:
                continue  # named in a warning already (`Excluded.warn_inside`)
            elif _is_directory(entry):
                subdirectories.append((Path(entry.path), real / entry.name))
            elif (secret := named_secret(entry.path)) is not None:
                log.warning("%s is %s: left out, never read as a document", display_name(entry.path), secret)
            else:
                yield Path(entry.path)
        pending.extend(reversed(subdirectories))


def _is_directory(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


@dataclass(frozen=True)
class Confinement:
    """Where the files of one add must have been read: a file found in a folder (walked, or given by a
    folder watcher) is read only as itself inside the folders: its real path is still the one the
    walk found (no folder on its way swapped for a link since, which would let a file the walk
    never saw in, the server's own or a hidden one) and it is the file read. A file the user named
    is read wherever it leads (`add LINK` is their choice)."""

    named: frozenset[Path] = frozenset()
    folders: tuple[tuple[Path, Path], ...] = ()  # (as given, real)

    @classmethod
    def of(cls, paths: Sequence[Path], watched: Sequence[Path] | None) -> Confinement:
        if watched:
            return cls(frozenset(), tuple(_as_given_and_real(f) for f in watched))
        given = [Path(p).expanduser().absolute() for p in paths]
        folders = tuple(_as_given_and_real(p) for p in given if p.is_dir())
        return cls(frozenset(p for p in given if not p.is_dir()), folders)

    def stays_inside(self, path: Path, uri: str) -> bool:
        """Whether `uri`, taken from a file's real path before it is read, is its path in the folder
        it was found in. A folder's entry swapped for a link to a file outside would otherwise give
        the document the outside file's uri: its text stored over a document added from there, or
        moved out (`holds` checks the read later; this the uri the read is stored under)."""
        if not isinstance(path, Path) or path in self.named:
            return True
        return any(
            uri == (folder / path.relative_to(given)).as_uri()
            for given, folder in self.folders
            if path.is_relative_to(given)
        )

    def holds(self, path: Path, read: FileSignature) -> bool:
        if not isinstance(path, Path):
            return True  # an object on an object store (sources.py): no link to be swapped for
        if path in self.named:
            return True
        real = resolve_links(path)
        return same_file(path, read) and any(
            path.is_relative_to(given) and real == os.fspath(folder / path.relative_to(given))
            for given, folder in self.folders
        )


def _as_given_and_real(folder: Path) -> tuple[Path, Path]:
    given = Path(folder).expanduser().absolute()
    return given, Path(resolve_links(given))
