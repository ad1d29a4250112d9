"""The extent of each sheet of an .xls (BIFF in a compound file), measured before calamine reads it.

calamine reads every sheet of an .xls when it opens the file (xls.rs `parse_workbook`) and holds
each as a dense grid of its cells' bounding box. A BIFF cell record keeps its row and column in
16 bits each, and calamine trusts them: one NUMBER record moved to column 65,535, row 65,535
makes a grid of 4 billion cells (128 GB), and a DIMENSIONS record makes it reserve as many as it
declares. Here the Workbook stream is found in the compound file (a small reader of its FAT,
mini FAT and directory), its records are walked as calamine walks them, and each sheet's
bounding box (and reserve) is measured. A sheet too large is neutralised in a copy of the file:
its cell and DIMENSIONS records get a type calamine skips, so it reads as empty and the other
sheets go in.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

from mcp_analysis.ingest.formats.base import Source, check_items
from mcp_analysis.ingest.formats.sheet_extent import Extent

MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_END = 0xFFFF_FFFE
_U32 = 0xFFFF_FFFF
_BOF, _EOF, _DIMENSIONS, _BOUNDSHEET, _FORMULA, _STRING, _MULRK = 0x0809, 0x000A, 0x0200, 0x0085, 0x0006, 0x0207, 0x00BD
# Records holding one cell at (row, column) in their first four bytes, as calamine pushes them.
_CELLS = frozenset({0x0203, 0x0204, 0x00D6, 0x0205, 0x027E, 0x00FD})
_MEASURED = _CELLS | {_DIMENSIONS, _FORMULA, _STRING, _MULRK}
_SKIPPED = 0x0000  # a record type calamine's sheet loop ignores


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
    data: bytes
    pieces: list[int]  # the file offset of each sector of the stream, in order
    piece: int  # their size


class _Compound:
    """Just enough of [MS-CFB] to read one stream and to map its bytes back to the file's."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        try:
            self.shift, self.mini_shift = struct.unpack_from("<HH", data, 0x1E)
            first_dir, _, cutoff, first_minifat, _, first_difat, difat_count = struct.unpack_from("<7I", data, 0x30)
        except struct.error:
            raise Unreadable("its header is cut short") from None
        if not 7 <= self.shift <= 16 or not 1 <= self.mini_shift < self.shift:
            raise Unreadable("its sector size is not one a compound file has")
        self.size = 1 << self.shift
        self.sectors = max(0, len(data) // self.size - 1)
        fat_sectors = [s for s in struct.unpack_from("<109I", data, 0x4C) if s < self.sectors]
        sector, per = first_difat, self.size // 4 - 1
        for _ in range(min(difat_count, self.sectors)):
            if sector >= self.sectors:
                break
            entries = struct.unpack_from(f"<{per + 1}I", data, self.offset(sector))
            fat_sectors += [s for s in entries[:per] if s < self.sectors]
            sector = entries[per]
        # a FAT sector listed more than once (or past what the file's sectors need) adds nothing: bounded
        fat_sectors = list(dict.fromkeys(fat_sectors))[: self.sectors // (self.size // 4) + 1]
        self.fat = [e for s in fat_sectors for e in struct.unpack_from(f"<{self.size // 4}I", data, self.offset(s))]
        self.cutoff = cutoff
        directory = self.read_chain(self.chain(first_dir, self.fat))
        self.entries = [directory[i : i + 128] for i in range(0, len(directory) - 127, 128)]
        if not self.entries:
            raise Unreadable("it has no directory")
        root_start = struct.unpack_from("<I", self.entries[0], 0x74)[0]
        self.root = self.chain(root_start, self.fat)
        minifat = self.read_chain(self.chain(first_minifat, self.fat))
        self.minifat = list(struct.unpack_from(f"<{len(minifat) // 4}I", minifat))

    def offset(self, sector: int) -> int:
        return (sector + 1) << self.shift

    def mini_offset(self, mini_sector: int) -> int:
        at = mini_sector << self.mini_shift
        index = at >> self.shift
        if index >= len(self.root):
            raise Unreadable("a mini sector lies past the mini stream")
        return self.offset(self.root[index]) + (at & (self.size - 1))

    def chain(self, start: int, table: list[int]) -> list[int]:
        sectors: list[int] = []
        while start != _END and start < len(table):
            sectors.append(start)
            if len(sectors) > len(table):
                raise Unreadable("a chain of its sectors loops")
            start = table[start]
        return sectors

    def read_chain(self, sectors: list[int]) -> bytes:
        return b"".join(self.data[self.offset(s) : self.offset(s) + self.size] for s in sectors)

    def stream(self, names: tuple[str, ...]) -> Stream:
        """The first stream with one of `names`, and where each of its pieces lies in the file."""
        for entry in self.entries:
            length = min(struct.unpack_from("<H", entry, 0x40)[0], 64)
            name = entry[: max(0, length - 2)].decode("utf-16-le", "replace")
            if entry[0x42] != 2 or name not in names:
                continue
            start, size = struct.unpack_from("<IQ", entry, 0x74)
            size &= _U32  # version 3 files leave the high half undefined
            if size < self.cutoff:
                sectors, piece, locate = self.chain(start, self.minifat), 1 << self.mini_shift, self.mini_offset
            else:
                sectors, piece, locate = self.chain(start, self.fat), self.size, self.offset
            starts = [locate(s) for s in sectors]
            return Stream(b"".join(self.data[s : s + piece] for s in starts)[:size], starts, piece)
        raise Unreadable("it has no Workbook stream")


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
    stream = _Compound(source.data).stream(("Workbook", "Book"))
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
    out = bytearray(data)
    for sheet in sheets:
        for offset, _kind, _data in _own_records(stream.data, sheet.at):
            for byte, value in enumerate(struct.pack("<H", _SKIPPED)):
                at = offset + byte
                out[stream.pieces[at // stream.piece] + at % stream.piece] = value
    return bytes(out)
