"""The converter contract: one file's bytes, read once, -> a DoclingDocument.

A converter is `convert(source: Source) -> Converted`. It runs in a conversion worker process
that bounds its memory and wall-clock time (and kills it past them); the structural bounds it
checks itself, as early as it can (`check_items`, `check_depth`, `BoundedZip`), so a hostile
file is refused before its parser spends minutes or gigabytes on it. It converts `source.data`
only, never the file on disk: the stored content is always the bytes that were hashed.

A file it cannot read raises `IngestError` whose message describes the file without naming it
(the pipeline reports it under the name the user gave). Parts it skipped while the rest is
usable (a sheet, a page) go into `Converted.warnings`: reported, not fatal.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

from mcp_analysis.errors import IngestError, IngestLimitError
from mcp_analysis.ingest.limits import MB, SETTING, Limits

if TYPE_CHECKING:
    from docling_core.types.doc import DoclingDocument

SNIFF_BYTES = 8192


@dataclass(frozen=True)
class Source:
    """One file to convert: its bytes, its name (for titles and the suffix) and its bounds."""

    data: bytes
    name: str
    limits: Limits = field(default_factory=Limits)

    @property
    def suffix(self) -> str:
        return PurePath(self.name).suffix.lower()

    @property
    def stem(self) -> str:
        return PurePath(self.name).stem or self.name


@dataclass
class TableRows:
    """Every row of one table a converter read as rows (a sheet, a CSV file), each row one
    RFC 4180 CSV line without line terminator, and the table's name.

    When `partial`, the document's TableItem (`self_ref`) holds the first rows only: a
    100,000-row sheet then costs one string per row rather than a pydantic object per cell.
    """

    self_ref: str
    name: str
    columns: int
    lines: list[str]
    partial: bool = False


@dataclass
class Converted:
    document: DoclingDocument
    format: str
    warnings: list[str] = field(default_factory=list)
    tables: list[TableRows] = field(default_factory=list)  # tables read as rows (names, every row)
    ocr_pages: list[int] = field(default_factory=list)  # pages whose text came from OCR
    metadata: dict[str, Any] = field(default_factory=dict)  # what the file says of itself (e-mail headers)


Converter = Callable[[Source], Converted]


def shown_limit(limits: Limits, bound: str) -> str:
    """`limits.<bound>` in the unit its setting uses: "100 MB", "120 s", "100,000"."""
    value = getattr(limits, bound)
    if bound in ("max_bytes", "max_unpacked_bytes"):
        return f"{value / MB:,.4g} MB"
    if bound == "max_memory_mb":
        return f"{value:,} MB"
    if bound == "max_seconds":
        return f"{value:g} s"
    return f"{value:,}"


def limit_error(limits: Limits, bound: str, found: str) -> IngestLimitError:
    """`found` exceeds `limits.<bound>`: a message with the bound and the setting that raises it."""
    return IngestLimitError(
        f"{found}, over the limit of {shown_limit(limits, bound)} (raise {SETTING[bound]} to allow it)"
    )


def limit_reached(limits: Limits, bound: str, doing: str) -> IngestLimitError:
    """`doing` was stopped at `limits.<bound>` (time, memory): the bound and the setting raising it."""
    return IngestLimitError(
        f"{doing} reached the limit of {shown_limit(limits, bound)} per file (raise {SETTING[bound]} to allow more)"
    )


def check_items(source: Source, count: int, what: str = "items") -> None:
    """Refuse a document with more than `ingest.max_items` items (paragraphs, cells, pages...)."""
    if count > source.limits.max_items:
        raise limit_error(source.limits, "max_items", f"at least {count:,} {what}")


def check_depth(source: Source, depth: int, what: str = "elements") -> None:
    """Refuse a document whose elements nest deeper than `ingest.max_depth`."""
    if depth > source.limits.max_depth:
        raise limit_error(source.limits, "max_depth", f"{what} nested {depth:,} levels deep")


class BoundedZip:
    """A zip-based file (DOCX, XLSX, ODF, EPUB) whose members unpack under `max_unpacked_bytes` in total.

    Members are read in pieces, so a zip bomb stops at the bound whatever sizes its header claims."""

    def __init__(self, source: Source) -> None:
        self.limits = source.limits
        self.left = source.limits.max_unpacked_bytes
        try:
            self.archive = zipfile.ZipFile(io.BytesIO(source.data))
        except (zipfile.BadZipFile, OSError, ValueError) as exc:
            raise IngestError(f"not a valid zip-based file ({exc})") from exc
        # zipfile never unpacks a member past its declared size, so the declared total bounds what
        # any reader of this archive in this process (python-docx, openpyxl, ...) can unpack.
        declared = sum(info.file_size for info in self.archive.infolist())
        if declared > self.left:
            raise limit_error(self.limits, "max_unpacked_bytes", f"it unpacks to {declared / MB:,.0f} MB")

    def names(self) -> list[str]:
        return self.archive.namelist()

    def chunks(self, name: str, size: int = MB) -> Callable[[], bytes]:
        """A reader of member `name`: each call returns the next piece (b"" at the end)."""
        try:
            member = self.archive.open(name)
        except KeyError as exc:
            raise IngestError(f"the file has no part {name!r}") from exc
        except (zipfile.BadZipFile, NotImplementedError, RuntimeError) as exc:
            raise IngestError(f"part {name!r} cannot be unpacked ({exc})") from exc

        def read() -> bytes:
            try:
                piece = member.read(size)
            except (zipfile.BadZipFile, OSError, EOFError) as exc:
                raise IngestError(f"part {name!r} is damaged ({exc})") from exc
            self.left -= len(piece)
            if self.left < 0:
                raise limit_error(self.limits, "max_unpacked_bytes", "the file unpacks to more")
            return piece

        return read

    def read(self, name: str) -> bytes:
        reader = self.chunks(name)
        parts = []
        while piece := reader():
            parts.append(piece)
        return b"".join(parts)


def looks_like_text(head: bytes) -> bool:
    """Text if the first bytes have no NUL and decode as UTF-8 (or are mostly printable cp1252/latin-1)."""
    if b"\x00" in head:
        return False
    try:
        head.decode("utf-8")
        return True
    except UnicodeDecodeError as exc:
        if exc.start >= len(head) - 3 and len(head) >= SNIFF_BYTES:  # a character cut at the sniff boundary
            return True
    controls = sum(1 for byte in head if byte < 32 and byte not in b"\t\n\r\f")
    return controls <= len(head) // 100


def decode_text(data: bytes) -> str:
    """Bytes of a text file as text: UTF-8 (with or without BOM); else line by line, since files
    pasted together from several exports mix encodings: each line UTF-8 where it is valid UTF-8,
    else cp1252, else latin-1 (one cp1252 line never turns the UTF-8 lines into mojibake)."""
    if b"\x00" in data:
        raise IngestError("looks like a binary file, not text (it contains NUL bytes)")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        pass
    lines = data.splitlines(keepends=True)
    if lines and lines[0].startswith(b"\xef\xbb\xbf"):
        lines[0] = lines[0][3:]
    return "".join(_decode_line(line) for line in lines)


def _decode_line(line: bytes) -> str:
    for encoding in ("utf-8", "cp1252"):
        try:
            return line.decode(encoding)
        except UnicodeDecodeError:
            continue
    return line.decode("latin-1")
