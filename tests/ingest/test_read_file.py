"""A file is read once, whole, as it was saved: one the system makes up as it is read is named for what it is."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from mcp_analysis.errors import IngestError
from mcp_analysis.ingest.files import read_file
from mcp_analysis.ingest.limits import Limits


def _text(head: bytes) -> bool:
    return True


def test_a_saved_file_is_read_whole_and_hashed(tmp_path: Path) -> None:
    saved = tmp_path / "a.md"
    saved.write_bytes(b"# A\n\nThe okapi.\n")
    read = read_file(saved, Limits(), _text)
    assert read.data == b"# A\n\nThe okapi.\n"
    assert read.digest == hashlib.sha256(read.data).hexdigest()
    assert read.signature.size == len(read.data)


@pytest.mark.parametrize("path", ["/proc/self/status", "/proc/cpuinfo"])
def test_a_file_the_kernel_makes_up_is_refused_as_such_not_as_one_being_written(path: str) -> None:
    """/proc files report 0 bytes and read as more: "add it again once it is saved" would never work."""
    with pytest.raises(IngestError) as refused:
        read_file(path, Limits(), _text)
    said = str(refused.value)
    assert "reports 0 bytes but reads as" in said and "generates it as it is read" in said
    assert "still being written" not in said
