"""`paths.resolve_links`: realpath, when a folder's writer swaps an entry between a link and a file.

Python 3.11's realpath sees a link, then reads it; swapped back to a file in between, the read fails
with EINVAL (gone: ENOENT), and `sync` stopped with "unexpected OSError". The swap is made at that
very moment here (a real link, `os.readlink` failing as the kernel would for a file).
"""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path

import pytest

from mcp_analysis.errors import IngestError
from mcp_analysis.ingest.files import collect_files
from mcp_analysis.paths import resolve_links


def swapped_while_read(monkeypatch: pytest.MonkeyPatch, races: int) -> list[str]:
    """`os.readlink` fails as for an entry that became a file, the first `races` times."""
    seen: list[str] = []
    readlink = os.readlink

    def racing(path: str, *args: object, **kwargs: object) -> str:
        seen.append(os.fspath(path))
        if len(seen) <= races:
            raise OSError(errno.EINVAL if len(seen) % 2 else errno.ENOENT, "Invalid argument", path)
        return readlink(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "readlink", racing)
    return seen


def test_an_entry_swapped_while_it_resolves_is_resolved_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "target.md"
    target.write_text("text")
    (tmp_path / "folder").mkdir()
    link = tmp_path / "folder" / "a.md"
    link.symlink_to(target)
    seen = swapped_while_read(monkeypatch, races=3)

    assert resolve_links(link) == os.fspath(target)
    assert len(seen) == 4  # three races, then the link read


def test_an_entry_that_keeps_changing_is_an_ingest_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    link = tmp_path / "a.md"
    link.symlink_to(tmp_path / "target.md")
    swapped_while_read(monkeypatch, races=1000)

    with pytest.raises(IngestError, match=re.escape("a.md' kept changing between a symbolic link and a file")):
        resolve_links(link)


def test_collecting_a_folder_goes_on_when_an_entry_is_swapped_while_it_resolves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "b.md").write_text("text")
    (folder / "a.md").symlink_to(folder / "b.md")  # a link inside: left to its target
    seen = swapped_while_read(monkeypatch, races=2)

    files, skipped = collect_files([folder])

    assert files == [folder / "b.md"] and not skipped
    assert seen  # the race was met
