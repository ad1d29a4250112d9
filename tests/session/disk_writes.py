"""What a call wrote to a folder on disk, told from before and after snapshots (tests and bench/)."""

from __future__ import annotations

from pathlib import Path

Snapshot = dict[Path, tuple[int, int, int]]


def files(directory: Path) -> Snapshot:
    """Every file under `directory`: (inode, mtime, size), to tell what a call wrote."""
    out = {}
    for path in directory.rglob("*"):
        if path.is_file():
            info = path.stat()
            out[path] = (info.st_ino, info.st_mtime_ns, info.st_size)
    return out


def written(before: Snapshot, after: Snapshot) -> int:
    """Bytes of the files that are new or rewritten (another inode or time) in `after`."""
    return sum(entry[2] for path, entry in after.items() if before.get(path, (0, 0, 0))[:2] != entry[:2])
