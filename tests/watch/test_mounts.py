"""Mount points under followed folders (watch/mounts.py), with the system's tables written here: what is
known, what is remembered for the next sync, and what is forgotten."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_analysis.watch import mounts
from mcp_analysis.watch.mounts import MountPoints


@pytest.fixture
def tables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """(mountinfo, fstab) files the module reads in place of the system's."""
    mountinfo, fstab = tmp_path / "mountinfo", tmp_path / "fstab"
    mountinfo.write_text("")
    fstab.write_text("")
    monkeypatch.setattr(mounts, "MOUNTINFO", mountinfo)
    monkeypatch.setattr(mounts, "FSTAB", fstab)
    return mountinfo, fstab


def mountinfo_line(point: Path) -> str:
    escaped = str(point).replace(" ", "\\040")
    return f"36 35 98:0 / {escaped} rw,noatime shared:1 - tmpfs tmpfs rw\n"


def test_a_share_seen_mounted_is_remembered_and_kept_while_nothing_is_mounted(
    tmp_path: Path, tables: tuple[Path, Path]
) -> None:
    mountinfo, _ = tables
    folder, memory = tmp_path / "w", tmp_path / "data" / "mount-points.json"
    share = folder / "the share"  # a space: written \\040 in the table
    share.mkdir(parents=True)
    mountinfo.write_text(mountinfo_line(share) + mountinfo_line(tmp_path / "elsewhere"))
    assert MountPoints([folder], memory).unmounted([folder]) == []  # mounted: nothing to keep
    mountinfo.write_text("")
    (share / ".not-mounted").write_text("")  # a marker under the mount point is no file of its own
    later = MountPoints([folder], memory)  # the next sync, a new process
    assert later.unmounted([share / "a.md"]) == [share]
    (share / "notes.md").write_text("# Notes\n")  # the folder holds files of its own again
    assert later.unmounted([folder]) == [] and MountPoints([folder], memory).known == set()


def test_fstab_declares_mount_points_mounted_or_not(tmp_path: Path, tables: tuple[Path, Path]) -> None:
    _, fstab = tables
    folder = tmp_path / "w"
    (folder / "nas").mkdir(parents=True)
    fstab.write_text(f"# comment\nserver:/export {folder / 'nas'} nfs noauto 0 0\nnone swap swap sw 0 0\n")
    assert MountPoints([folder], tmp_path / "m.json").unmounted([folder]) == [folder / "nas"]


@pytest.mark.parametrize("saved", ["[" * 100_000, "{not json", '{"a": 1}', "[1, 2]"])
def test_a_corrupt_memory_is_no_memory(tmp_path: Path, tables: tuple[Path, Path], saved: str) -> None:
    memory = tmp_path / "mount-points.json"
    memory.write_text(saved)
    assert MountPoints([tmp_path / "w"], memory).known == set()
