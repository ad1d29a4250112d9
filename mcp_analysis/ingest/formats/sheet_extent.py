"""The extent of each worksheet of an .xlsx/.xlsm, measured from its XML before calamine reads it.

calamine holds a sheet as a dense grid of its bounding box: one value in A1 and one in
XFD1048576 make 17 billion cells, an allocation that aborts the process. A sheet's XML is
parsed here in pieces (expat, through BoundedZip, so it is bounded too) and positioned as
calamine 0.37 positions cells (xlsx/cells_reader.rs, `get_row_column`): a reference is
letters (either case, any number of them) then digits (leading zeros allowed), in u32
arithmetic; a cell without one follows the previous cell of its row; a row's `r` sets the
row, its end moves to the next one (comments and a cell's contents move nothing). When every
cell has a reference (most writers), a quick pass reads start tags only. Only cells that can
hold a value count (a styled empty cell, `<c r="X9" s="1"/>`, is not in calamine's grid); a
doubtful one counts, so the measure is never below calamine's grid. A value past XFD1048576
(which no spreadsheet program writes; `ZZZZ2` is 475,254 columns wide), a reference calamine
would not read, XML that is not well-formed or a DOCTYPE make the sheet unmeasurable: it is
refused rather than guessed. `<dimension ref>` is not measured: calamine only uses it to
reserve at most 100,000 cells.
"""

from __future__ import annotations

import io
import posixpath
import re
import zipfile
from dataclasses import dataclass
from typing import Any
from xml.etree import ElementTree
from xml.parsers import expat

from mcp_analysis.errors import IngestError
from mcp_analysis.ingest.formats.base import MB, BoundedZip

_RELATIONSHIP = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}id"
_U32 = 0xFFFF_FFFF
GRID_ROWS, GRID_COLUMNS = 1_048_576, 16_384  # a worksheet's grid ends at XFD1048576
_SHORT_REF = re.compile(r"([A-Za-z]{0,6})([0-9]{1,9})", re.ASCII)  # no u32 wrap-around possible


def _column_numbers() -> dict[str, int]:
    """0-based column of every one- and two-letter column, in either case (the quick pass's lookups)."""
    letters = [chr(c) for c in range(65, 91)]
    names = letters + [a + b for a in letters for b in letters]
    found = {}
    for name in names:
        number = 0
        for letter in name:
            number = number * 26 + ord(letter) - 64
        found[name] = found[name.lower()] = number - 1
    return found


_COLUMNS = _column_numbers()
# <v> types whose empty text calamine reads as an empty cell; any other type makes a value of it.
_EMPTY_WHEN_BLANK = frozenset({None, "n", "s", "b", "e"})
_NO_VALUE_IN_V = frozenset({"inlineStr", "is"})  # calamine ignores <v> in inline-string cells


@dataclass(frozen=True)
class Extent:
    rows: int
    columns: int
    problem: str | None = None  # set when the sheet cannot be measured: refuse it, never guess

    @property
    def cells(self) -> int:
        return self.rows * self.columns


class _Unmeasurable(Exception):
    pass


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


def repack(archive: BoundedZip, replace: dict[str, bytes]) -> bytes:
    """The archive again, its members in order, with the parts in `replace` changed (for calamine to read)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as packed:
        for info in archive.archive.infolist():
            data = replace[info.filename] if info.filename in replace else archive.read(info.filename)
            packed.writestr(info, data, compress_type=info.compress_type)
    return buffer.getvalue()


def position(ref: str) -> tuple[int, int | None]:
    """A cell reference as calamine reads it: (row, column or None), 0-based; ValueError where it fails."""
    short = _SHORT_REF.fullmatch(ref)
    if short:
        letters, digits = short.groups()
        row, column = int(digits), 0
        for letter in letters.upper():
            column = column * 26 + ord(letter) - 64
    else:  # long or odd: calamine's loop, wrapping at 2**32 as it does
        row = column = 0
        index = 0
        while index < len(ref) and not ("0" <= ref[index] <= "9"):
            letter = ref[index]
            if not (letter.isascii() and letter.isalpha()):
                raise ValueError(ref)
            column = (column * 26 + ord(letter.upper()) - 64) & _U32
            index += 1
        for digit in ref[index:]:
            if not "0" <= digit <= "9":
                raise ValueError(ref)
            row = (row * 10 + ord(digit) - 48) & _U32
    if row == 0:
        raise ValueError(ref)
    return row - 1, column - 1 if column else None


class _Sheet:
    """expat handlers following calamine's cell reader over one worksheet part."""

    def __init__(self) -> None:
        self.state = "before"  # -> "data" inside the first <sheetData> -> "after" once it ends
        self.row = self.column = 0
        self.cell: tuple[int, int] | None = None  # the open <c>'s position
        self.cell_type: str | None = None
        self.depth = 0  # elements open inside the cell
        self.valued = False
        self.in_v = False
        self.top = self.left = 1 << 40
        self.bottom = self.right = -1

    def start(self, name: str, attrs: dict[str, str]) -> None:
        local = name.split(":", 1)[-1]
        if self.state != "data":
            if self.state == "before" and local == "sheetData":
                self.state = "data"
            return
        if self.cell is not None:
            self.depth += 1
            if local == "is":
                self.valued = True
            elif local == "v" and self.cell_type not in _NO_VALUE_IN_V:
                self.valued = self.valued or self.cell_type not in _EMPTY_WHEN_BLANK
                self.in_v = True
            return
        if local == "row" and "r" in attrs:
            self.row = _row_of(attrs["r"])
        elif local == "c":
            ref = attrs.get("r")
            if ref is None:
                self.cell = (self.row, self.column)
            else:
                row, column = _cell_of(ref)
                self.column = column
                self.cell = (row, column)
            self.cell_type = attrs.get("t")
            self.depth = 0
            self.valued = False

    def end(self, name: str) -> None:
        if self.state != "data":
            return
        if self.cell is not None:
            if self.depth:
                self.depth -= 1
                self.in_v = False
                return
            if self.valued:
                _include(self, *self.cell)
            self.cell = None
            self.column = (self.column + 1) & _U32
            return
        local = name.split(":", 1)[-1]
        if local == "row":
            self.row = (self.row + 1) & _U32
            self.column = 0
        elif local == "sheetData":
            self.state = "after"

    def text(self, data: str) -> None:
        if self.in_v and data:
            self.valued = True


def _row_of(ref: str) -> int:
    try:
        return position(ref)[0]
    except ValueError:
        raise _Unmeasurable(f"its row reference {ref[:40]!r} is not a row number") from None


def _cell_of(ref: str) -> tuple[int, int]:
    try:
        row, column = position(ref)
    except ValueError:
        column = None
    if column is None:
        raise _Unmeasurable(f"its cell reference {ref[:40]!r} is not a column and a row (like B7)")
    return row, column


def _no_doctype(*_args: Any) -> None:
    raise _Unmeasurable("its XML declares a DOCTYPE, which no worksheet has")


class _NeedsRows(Exception):
    """A cell without `r`: its place depends on the rows and cells before it (the full pass)."""


class _Referenced:
    """The quick pass, for a sheet whose every cell has `r` (what Excel, LibreOffice and most writers
    write): a cell's place is then its reference alone, so start tags suffice (half the calls of
    the full pass). Any <v> or <is> after a cell's start gives it a value: never less than calamine."""

    def __init__(self) -> None:
        self.cell: tuple[int, int] | None = None
        self.cell_type: str | None = None
        self.valued = False
        self.top = self.left = 1 << 40
        self.bottom = self.right = -1

    def start(self, name: str, attrs: dict[str, str]) -> None:
        if ":" in name:
            name = name.split(":", 1)[1]
        if name == "c":  # the hot path: once per cell, so comparisons here, no calls beyond the reference's
            if self.valued:
                self.close()
            ref = attrs.get("r")
            if ref is None:
                raise _NeedsRows
            short = _SHORT_REF.fullmatch(ref)
            column = _COLUMNS.get(short.group(1)) if short else None
            if short is None or column is None or short.group(2).lstrip("0") == "":
                self.cell = _cell_of(ref)
            else:
                self.cell = (int(short.group(2)) - 1, column)
            self.cell_type, self.valued = attrs.get("t"), False
        elif (name == "is" or (name == "v" and self.cell_type not in _NO_VALUE_IN_V)) and self.cell is not None:
            self.valued = True  # never reset by a later child: at most more cells than calamine, never fewer

    def close(self) -> None:
        if self.cell is not None and self.valued:
            row, column = self.cell
            if row < self.top or row > self.bottom or column < self.left or column > self.right:
                _include(self, row, column)
        self.cell = None
        self.valued = False


def _include(box: _Sheet | _Referenced, row: int, column: int) -> None:
    """Grow `box` to a cell with a value; one past the grid's last cell makes the sheet unmeasurable."""
    if row >= GRID_ROWS or column >= GRID_COLUMNS:
        raise _Unmeasurable(
            f"a cell with a value at row {row + 1:,}, column {column + 1:,} lies outside a worksheet's "
            "grid (its last cell is XFD1048576)"
        )
    box.top, box.bottom = min(box.top, row), max(box.bottom, row)
    box.left, box.right = min(box.left, column), max(box.right, column)


def _parse(archive: BoundedZip, part: str, handlers: _Sheet | _Referenced) -> None:
    parser = expat.ParserCreate()
    parser.buffer_text = True
    parser.StartElementHandler = handlers.start
    parser.StartDoctypeDeclHandler = _no_doctype
    if isinstance(handlers, _Sheet):
        parser.EndElementHandler = handlers.end
        parser.CharacterDataHandler = handlers.text
    read = archive.chunks(part, MB)
    while piece := read():
        parser.Parse(piece, False)
        if isinstance(handlers, _Sheet) and handlers.state == "after":
            return
    parser.Parse(b"", True)


def measure(archive: BoundedZip, part: str) -> Extent | None:
    """The bounding box of the cells with a value in `part` (None: no such cell, or no such part);
    an Extent with a `problem` when the part cannot be measured."""
    if part not in archive.names():
        return None
    budget = archive.left
    box: _Sheet | _Referenced = _Referenced()
    try:
        try:
            _parse(archive, part, box)
            box.close()
        except _NeedsRows:
            archive.left = budget  # the part is read again from its start: its bytes count once
            box = _Sheet()
            _parse(archive, part, box)
    except _Unmeasurable as exc:
        return Extent(0, 0, str(exc))
    except expat.ExpatError as exc:
        return Extent(0, 0, f"its XML is not well-formed ({exc})")
    if box.bottom < 0:
        return None
    return Extent(box.bottom - box.top + 1, box.right - box.left + 1)
