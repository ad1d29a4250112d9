"""The extent of each sheet of an .xls (BIFF in a compound file), measured before calamine reads it.

calamine reads every sheet of an .xls when it opens the file (xls.rs `parse_workbook`) and holds
each as a dense grid of its cells' bounding box. A BIFF cell record keeps its row and column in
16 bits each, and calamine trusts them: one NUMBER record moved to column 65,535, row 65,535
makes a grid of 4 billion cells (128 GB), and a DIMENSIONS record makes it reserve as many as it
declares. Here olefile reads the Workbook stream out of the compound file, its records are walked
as calamine walks them, and each sheet's bounding box (and reserve) is measured. A sheet too large
is neutralised in a copy of the file: its cell and DIMENSIONS records get a type calamine skips
(the stream keeps its size, so olefile writes it back over its own sectors), so it reads as empty
and the other sheets go in.

olefile trusts the sizes a file declares as far as its memory goes: a few KB declaring a FAT of
billions of sectors, or a stream of 4 GB over a chain that loops, keep it reading for minutes or
take gigabytes, and writing a mini stream back follows its chain to its end, forever if it loops.
So no size is let past the file's own, and the Workbook stream's chains must end where its size
says; a compound file that fails this is Unreadable, as is one olefile cannot follow.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import olefile

from mcp_analysis.ingest.formats.base import Source, check_items
from mcp_analysis.ingest.formats.sheet_extent import Extent

MAGIC = olefile.MAGIC
_U32 = 0xFFFF_FFFF
_BOF, _EOF, _DIMENSIONS, _BOUNDSHEET, _FORMULA, _STRING, _MULRK = 0x0809, 0x000A, 0x0200, 0x0085, 0x0006, 0x0207, 0x00BD
# Records holding one cell at (row, column) in their first four bytes, as calamine pushes them.
_CELLS = frozenset({0x0203, 0x0204, 0x00D6, 0x0205, 0x027E, 0x00FD})
_MEASURED = _CELLS | {_DIMENSIONS, _FORMULA, _STRING, _MULRK}
_SKIPPED = 0x0000  # a record type calamine's sheet loop ignores
# What olefile raises for a compound file it cannot follow (OleFileError is an OSError).
_OLEFILE_ERRORS = (OSError, ValueError, IndexError, struct.error, RecursionError)


class Unreadable(Exception):
    """The compound file or its Workbook stream cannot be followed as calamine would."""


@dataclass
class XlsSheet:
    name: str
    extent: Extent
    reserve: int  # cells a DIMENSIONS record makes calamine reserve
    at: int  # where its records start in the Workbook stream

    @property
    def cells(self) -> int:
        return max(self.extent.cells, self.reserve)


@dataclass
class Stream:
    name: str  # "Workbook", or "Book" (BIFF5)
    data: bytes


class _Ole(olefile.OleFileIO):
    """olefile without its check that no two streams start at one sector: a search of a list per directory
    entry, quadratic (3 s for a 2 MB directory, 20 s for 6 MB, past an hour for 100 MB), for a defect it only
    logs at the level read here (DEFECT_FATAL)."""

    def _check_duplicate_stream(self, first_sect: int, minifat: bool = False) -> None:
        return None


def _compound(data: bytes) -> _Ole:
    """The compound file, if its header has sectors calamine reads and a FAT no larger than the file needs
    (olefile reads every FAT sector the header counts, each copying the FAT read so far)."""
    try:
        shift, mini_shift = struct.unpack_from("<HH", data, 0x1E)
        (fat_sectors,) = struct.unpack_from("<I", data, 0x2C)
    except struct.error:
        raise Unreadable("its header is cut short") from None
    if shift not in (9, 12) or mini_shift != 6:
        raise Unreadable("its sector size is not one a compound file has")
    if fat_sectors > ((len(data) - 1) >> shift) // (1 << (shift - 2)) + 1:  # the FAT of as many sectors as it has
        raise Unreadable("its FAT is declared larger than the file")
    return _Ole(io.BytesIO(data))


def _workbook(data: bytes) -> Stream:
    """The stream calamine reads, read by olefile, which must find it where calamine does, its size within the
    file's, and its chain (and the mini stream's, for a stream in it) ending where its size says."""
    try:
        ole = _compound(data)
        name, entry = _entry(ole)
        if max(entry.size, ole.root.size, ole.num_mini_fat_sectors * ole.sector_size) > len(data):
            raise Unreadable(f"its {name} stream is declared larger than the file")
        stream = ole.openstream(name).read()
        if entry.size < ole.minisectorcutoff:  # in the mini stream, which the root entry chains
            whole = ole.root.entry_type == olefile.STGTY_ROOT
            whole = whole and _chained(ole.minifat, entry.isectStart, entry.size, ole.mini_sector_size)
            whole = whole and _chained(ole.fat, ole.root.isectStart, ole.root.size, ole.sector_size)
        else:
            whole = _chained(ole.fat, entry.isectStart, entry.size, ole.sector_size)
    except _OLEFILE_ERRORS as exc:
        raise Unreadable(f"olefile cannot follow it ({exc})") from None
    if not whole or len(stream) != entry.size:
        raise Unreadable(f"its {name} stream's sectors do not chain as its size says")
    return Stream(name, stream)


def _entry(ole: _Ole) -> tuple[str, olefile.olefile.OleDirectoryEntry]:
    """The entry calamine reads: the first in the directory named Workbook (else Book), a name read up to its
    first NUL. olefile finds streams by name (case-blind) in the directory's tree: it must find that one."""
    directory = ole.directory_fp.getvalue()
    names = [
        directory[at : at + 64].decode("utf-16-le", "replace").split("\0")[0]
        for at in range(0, len(directory) - 127, 128)
    ]
    for name in ("Workbook", "Book"):
        if name in names:
            found = [kid for kid in ole.root.kids if kid.name.lower() == name.lower()]
            if [kid.sid for kid in found] != [names.index(name)] or found[0].entry_type != olefile.STGTY_STREAM:
                raise Unreadable(f"its {name} stream is not the one its directory's tree leads to")
            return name, found[0]
    raise Unreadable("it has no Workbook stream")


def _chained(table: Sequence[int], start: int, size: int, sector: int) -> bool:
    """Whether the chain from `start` is `size` bytes of sectors in `table` and ends there: olefile writes a
    stream back along that many sectors, and follows a mini stream's chains to their end."""
    for _ in range(-(-size // sector)):
        if start >= len(table):
            return False
        start = table[start]
    return start == olefile.ENDOFCHAIN


def _position(data: bytes) -> tuple[int, int]:
    row, column = struct.unpack_from("<HH", data)
    return row, column


def _records(stream: bytes, at: int) -> Iterator[tuple[int, int, bytes]]:
    """(offset, type, data) of each record from `at` (a CONTINUE record is one of its own here: calamine
    appends it to the record before, which changes no record's place)."""
    while at + 4 <= len(stream):
        kind, length = struct.unpack_from("<HH", stream, at)
        if at + 4 + length > len(stream):
            return
        yield at, kind, stream[at + 4 : at + 4 + length]
        at += 4 + length


def _own_records(stream: bytes, at: int) -> Iterator[tuple[int, int, bytes]]:
    """The records of the sheet whose BOF is at `at`, up to its EOF, without those of the substreams
    nested in it (embedded charts), as calamine reads them."""
    depth, seen = 0, False
    for offset, kind, data in _records(stream, at):
        if depth:
            depth += 1 if kind == _BOF else -1 if kind == _EOF else 0
        elif kind == _BOF:
            depth, seen = (1, seen) if seen else (0, True)
        elif kind == _EOF:
            return
        elif kind in _MEASURED:
            yield offset, kind, data


def _sheet(stream: bytes, name: str, at: int) -> XlsSheet:
    top = left = 1 << 40
    bottom = right = -1
    reserve, formula = 0, (0, 0)

    def cell(row: int, column: int) -> None:
        nonlocal top, bottom, left, right
        top, bottom, left, right = min(top, row), max(bottom, row), min(left, column), max(right, column)

    for _offset, kind, data in _own_records(stream, at):
        if kind == _DIMENSIONS and len(data) in (10, 14):
            reserve = max(reserve, _reserve(data))
        elif kind in _CELLS and len(data) >= 4:
            cell(*_position(data))
        elif kind == _FORMULA and len(data) >= 4:
            formula = _position(data)
            cell(*formula)
        elif kind == _STRING:
            cell(*formula)
        elif kind == _MULRK and len(data) >= 6:
            row, first = _position(data)
            cell(row, first)
            cell(row, first + max(0, (len(data) - 6) // 6 - 1))
    extent = Extent(bottom - top + 1, right - left + 1) if bottom >= 0 else Extent(0, 0)
    return XlsSheet(name, extent, reserve, at)


def _reserve(data: bytes) -> int:
    """What calamine reserves for a DIMENSIONS record (xls.rs `parse_dimensions`, u32 arithmetic)."""
    if len(data) == 10:
        first_row, last_row, first_col, last_col = struct.unpack_from("<4H", data)
    else:
        first_row, last_row, first_col, last_col = struct.unpack_from("<2I2H", data)
    if first_col > 0xFF or last_col < first_col:
        first_col = 0
    end_row, end_col = (last_row - 1, last_col - 1) if last_row >= 1 and last_col >= 1 else (first_row, first_col)
    return ((end_row - first_row + 1) & _U32) * ((end_col - first_col + 1) & _U32)


def _name(data: bytes) -> str:
    """A BOUNDSHEET's sheet name (BIFF8: a length, a flag for UTF-16, the characters)."""
    if len(data) < 8:
        return ""
    length, wide = data[6], data[7] & 1
    raw = data[8 : 8 + length * (2 if wide else 1)]
    text = raw.decode("utf-16-le", "replace") if wide else raw.decode("latin-1")
    return text.replace("\0", "")


def measure_xls(source: Source) -> tuple[list[XlsSheet], Stream]:
    """Every sheet listed in the Workbook stream (calamine reads chart and macro sheets' cells too), measured."""
    stream = _workbook(source.data)
    sheets = []
    for _offset, kind, record in _records(stream.data, 0):
        if kind == _EOF:
            break
        if kind == _BOUNDSHEET and len(record) >= 6:
            check_items(source, len(sheets) + 1, "sheets")
            sheets.append(_sheet(stream.data, _name(record), struct.unpack_from("<I", record)[0]))
    return sheets, stream


def neutralised(data: bytes, sheets: list[XlsSheet], stream: Stream) -> bytes:
    """The file with the cell and DIMENSIONS records of `sheets` given a type calamine skips."""
    records = bytearray(stream.data)
    for sheet in sheets:
        for offset, _kind, _data in _own_records(stream.data, sheet.at):
            struct.pack_into("<H", records, offset, _SKIPPED)
    copy = io.BytesIO(data)
    _Ole(copy).write_stream(stream.name, bytes(records))  # the same size: over the same sectors
    return copy.getvalue()
