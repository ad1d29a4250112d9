"""Checks shared by the office-format converters (OOXML and OpenDocument containers)."""

from __future__ import annotations

import io
import zipfile

from mcp_analysis.ingest.formats.base import BoundedZip, Source

_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_ENCRYPTED_STREAM = "EncryptedPackage".encode("utf-16-le")


def is_encrypted_ooxml(data: bytes) -> bool:
    """An Office 2007+ file saved with a password is an OLE container holding 'EncryptedPackage'."""
    return data.startswith(_OLE_MAGIC) and _ENCRYPTED_STREAM in data[:1_000_000]


def is_encrypted_odf(data: bytes) -> bool:
    """An OpenDocument file saved with a password lists encryption data in its manifest."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            manifest = archive.read("META-INF/manifest.xml")
    except (zipfile.BadZipFile, KeyError, OSError, RuntimeError):
        return False
    return b"encryption-data" in manifest


def check_unpacked(source: Source) -> None:
    """A zip container (OOXML, ODF, EPUB) whose members declare more than `ingest.max_unpacked_mb`
    is refused before its reader unpacks anything (BoundedZip checks the declared total)."""
    try:
        zipfile.ZipFile(io.BytesIO(source.data)).close()
    except (zipfile.BadZipFile, OSError, ValueError):
        return  # not a zip, or a damaged one: the format's reader says what it makes of it
    BoundedZip(source)


# A part only one kind of zip-based file has, and what that kind is called and named.
_KINDS = (
    ("word/document.xml", "a Word document", ".docx"),
    ("xl/workbook.xml", "an Excel workbook", ".xlsx"),
    ("ppt/presentation.xml", "a PowerPoint deck", ".pptx"),
    ("META-INF/container.xml", "an e-book", ".epub"),
)


def another_kind(data: bytes, expected: str) -> str:
    """For a file that its reader refused: "; it is a Word document: rename it .docx" when the
    archive is another office kind than `expected` (a suffix), else ""."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = set(archive.namelist())
    except (zipfile.BadZipFile, OSError, ValueError):
        return ""
    for part, kind, suffix in _KINDS:
        if part in names and suffix != expected:
            return f"; it is {kind}: rename it {suffix}"
    if not any(part in names for part, _, _ in _KINDS) and "mimetype" not in names:
        return "; it is a plain zip archive, not an office file"
    return ""


def encrypted_message(kind: str) -> str:
    return f"the {kind} is password-protected (encrypted); add a copy saved without a password"


def reason(exc: BaseException) -> str:
    """An exception as a short, one-line reason."""
    text = " ".join(str(exc).split())
    kind = type(exc).__name__
    if not text or len(text) < 12:
        text = f"{kind}: {text}" if text else kind
    return text[:200]
