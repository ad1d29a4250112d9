"""The extent of each worksheet of an .xlsx/.xlsm, measured from its XML before calamine reads it.

calamine holds a sheet as a dense grid of its bounding box: one value in A1 and one in
XFD1048576 make 17 billion cells, an allocation that aborts the process. A sheet's XML is
scanned here in pieces (through BoundedZip, so it is bounded too) for the cells that hold
a value, as calamine counts them (a styled empty cell, `<c r="X9" s="1"/>` or `<c r="X9"></c>`,
is not one), so a sheet whose grid is too large is refused by name before it is built.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from xml.etree import ElementTree

from mcp_analysis.errors import IngestError
from mcp_analysis.ingest.formats.base import MB, BoundedZip

# `[^<>]`, not `[^>]`: a run of unclosed "<c " would otherwise make each match scan to the end
# (quadratic time). An empty `<c ...></c>` holds no value either, as calamine counts cells.
_TAG = re.compile(rb"<(?:[\w.-]+:)?(row|c)(\s[^<>]*?)?(/?)>(\s*</(?:[\w.-]+:)?c>)?")
_REF = re.compile(rb"""\sr\s*=\s*["']([A-Z]{1,3})?([0-9]{1,7})["']""")
_OVERLAP = 4096  # a tag cut between two pieces is whole in the next one (tags here are short)
_RELATIONSHIP = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}id"


@dataclass(frozen=True)
class Extent:
    rows: int
    columns: int

    @property
    def cells(self) -> int:
        return self.rows * self.columns


def sheet_parts(archive: BoundedZip) -> dict[str, str]:
    """Sheet name -> its part's path in the archive (from xl/workbook.xml and its relationships)."""
    try:
        book = ElementTree.fromstring(archive.read("xl/workbook.xml"))
        rels = ElementTree.fromstring(archive.read("xl/_rels/workbook.xml.rels"))
    except (ElementTree.ParseError, ValueError, IngestError):  # calamine reports a damaged workbook
        return {}
    targets = {r.get("Id"): r.get("Target", "") for r in rels if r.get("Id")}
    parts: dict[str, str] = {}
    for sheet in book.iter():
        if not sheet.tag.endswith("}sheet") or sheet.get("name") is None:
            continue
        target = targets.get(sheet.get(_RELATIONSHIP))
        if target:
            path = target.lstrip("/") if target.startswith("/") else posixpath.normpath(posixpath.join("xl", target))
            parts[str(sheet.get("name"))] = path
    return parts


def _column(letters: bytes) -> int:
    number = 0
    for letter in letters:
        number = number * 26 + letter - 64
    return number


def measure(archive: BoundedZip, part: str) -> Extent | None:
    """The bounding box of the cells with a value in `part` (None: no such cell, or no such part)."""
    if part not in archive.names():
        return None
    read = archive.chunks(part, MB)
    top = left = 1 << 40
    bottom = right = 0
    row = 0
    text = b""
    while True:
        piece = read()
        text += piece
        end = max(0, len(text) - _OVERLAP) if piece else len(text)  # the last tags wait for the next piece
        for match in _TAG.finditer(text):
            if match.start() >= end:
                break
            ref = _REF.search(match.group(2) or b"")
            if match.group(1) == b"row":
                row = int(ref.group(2)) if ref else row + 1
                continue
            if match.group(3) or match.group(4):  # <c .../> or <c ...></c>: no value, not in calamine's grid
                continue
            cell_row = int(ref.group(2)) if ref else row
            column = _column(ref.group(1)) if ref and ref.group(1) else 1
            top, bottom = min(top, cell_row), max(bottom, cell_row)
            left, right = min(left, column), max(right, column)
        if not piece:
            break
        text = text[end:]
    if not bottom:
        return None
    return Extent(bottom - top + 1, right - left + 1)
