"""Compound files ([MS-CFB], 512-byte sectors) written sector by sector, as an attacker or an odd
exporter writes them: streams under 4,096 bytes in the mini stream (xlwt pads its Workbook stream
past that), and files whose header, FAT or mini FAT declare more than they hold."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

SECTOR, MINI = 512, 64
END, FREE, FAT_SECTOR = 0xFFFF_FFFE, 0xFFFF_FFFF, 0xFFFF_FFFD
NONE = 0xFFFF_FFFF  # no sibling, no child
# The header: signature, CLSID, then these fields, then the first 109 FAT sectors.
_NAMES = ("minor", "major", "byte_order", "sector_shift", "mini_shift", "reserved", "reserved1", "dir_sectors")
_NAMES += ("fat_sectors", "first_dir", "transaction", "cutoff", "first_minifat", "minifat_sectors")
_NAMES += ("first_difat", "difat_sectors")
HEADER = struct.Struct("<8s16sHHHHHHIIIIIIIIII")
MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"


@dataclass
class Entry:
    name: str
    kind: int  # 5 root, 2 stream
    start: int = END
    size: int = 0
    left: int = NONE
    right: int = NONE
    child: int = NONE

    def pack(self) -> bytes:
        name = (self.name + "\0").encode("utf-16-le")
        head = struct.pack("<64sHBBIII", name, len(name), self.kind, 1, self.left, self.right, self.child)
        return head + bytes(36) + struct.pack("<IQ", self.start, self.size)


@dataclass
class Compound:
    """Sectors and their FAT, filled in order: `chain` lays a blob down and returns its first sector."""

    sectors: list[bytes] = field(default_factory=list)
    fat: list[int] = field(default_factory=list)

    def chain(self, blob: bytes) -> int:
        if not blob:
            return END
        first = len(self.sectors)
        for at in range(0, len(blob), SECTOR):
            self.sectors.append(blob[at : at + SECTOR].ljust(SECTOR, b"\0"))
            self.fat.append(len(self.sectors))
        self.fat[-1] = END
        return first


def _tree(entries: list[Entry], sids: list[int]) -> int:
    """A balanced tree of `sids` by left and right siblings (olefile and calamine read no colours)."""
    if not sids:
        return NONE
    middle = len(sids) // 2
    node = entries[sids[middle]]
    node.left, node.right = _tree(entries, sids[:middle]), _tree(entries, sids[middle + 1 :])
    return sids[middle]


def compound(streams: list[tuple[str, bytes]], extra: list[Entry] | None = None) -> bytes:
    """A compound file holding `streams` at its root, and `extra` entries (any start and size) beside them."""
    file = Compound()
    entries = [Entry("Root Entry", 5)]
    mini, minifat = b"", []
    for name, data in streams:
        if len(data) >= 4096:
            entries.append(Entry(name, 2, file.chain(data), len(data)))
            continue
        count = -(-len(data) // MINI)
        first = len(mini) // MINI
        minifat += [*range(first + 1, first + count), END] if count else []
        entries.append(Entry(name, 2, first if count else END, len(data)))
        mini += data.ljust(count * MINI, b"\0")
    entries += extra or []
    entries[0].start, entries[0].size = file.chain(mini), len(mini)
    entries[0].child = _tree(entries, list(range(1, len(entries))))
    first_minifat = file.chain(struct.pack(f"<{len(minifat)}I", *minifat))
    first_dir = file.chain(b"".join(e.pack() for e in entries))
    fat_sectors = -(-(len(file.sectors) + 1) // (SECTOR // 4 - 1))
    assert fat_sectors <= 109, "no DIFAT here: a few MB at most"
    at = len(file.sectors)
    file.fat += [FAT_SECTOR] * fat_sectors
    table = file.fat + [FREE] * (fat_sectors * SECTOR // 4 - len(file.fat))
    file.sectors += [struct.pack(f"<{SECTOR // 4}I", *table[i : i + SECTOR // 4]) for i in range(0, len(table), 128)]
    fields = dict.fromkeys(_NAMES, 0) | {"minor": 0x3E, "major": 3, "byte_order": 0xFFFE, "sector_shift": 9}
    fields |= {"mini_shift": 6, "fat_sectors": fat_sectors, "first_dir": first_dir, "cutoff": 4096}
    fields |= {"first_minifat": first_minifat, "minifat_sectors": -(-len(minifat) * 4 // SECTOR), "first_difat": END}
    difat = [*range(at, at + fat_sectors)] + [FREE] * (109 - fat_sectors)
    head = HEADER.pack(MAGIC, bytes(16), *fields.values())
    return head + struct.pack("<109I", *difat) + b"".join(file.sectors)


def header(data: bytes) -> dict[str, int]:
    """The header's fields after its CLSID, by name."""
    return dict(zip(_NAMES, HEADER.unpack_from(data)[2:], strict=True))


def with_header(data: bytes, **changes: int) -> bytes:
    magic, clsid, *_ = HEADER.unpack_from(data)
    return HEADER.pack(magic, clsid, *{**header(data), **changes}.values()) + data[HEADER.size :]


def _at(sector: int) -> int:
    return SECTOR * (sector + 1)


def _workbook(data: bytes) -> int:
    """Where the Workbook stream's directory entry (the first after the root) lies."""
    return _at(header(data)["first_dir"]) + 128


def fat_of_billions(data: bytes) -> bytes:
    """The header declares 4 billion FAT sectors, and a DIFAT sector listing the first FAT sector 127 times,
    then itself: olefile reads every FAT sector declared, each read copying the FAT read so far."""
    out = bytearray(data)
    fat, count = struct.unpack_from("<I", data, HEADER.size)[0], 4_000_000_000
    struct.pack_into("<128I", out, _at(0), *[fat] * 127, 0)
    return with_header(bytes(out), fat_sectors=count, first_difat=0, difat_sectors=(count - 109 + 126) // 127)


def stream_of_gigabytes(data: bytes) -> bytes:
    """The Workbook stream (in FAT sectors) declares 4 GB, and its last sector chains back to its first."""
    out = bytearray(data)
    entry = _workbook(data)
    start, size = struct.unpack_from("<IQ", data, entry + 116)
    struct.pack_into("<I", out, entry + 120, 0xFFFF_FFF0)
    fat = struct.unpack_from("<I", data, HEADER.size)[0]
    struct.pack_into("<I", out, _at(fat) + 4 * (start + -(-size // SECTOR) - 1), start)
    return bytes(out)


def mini_chain_looping(data: bytes) -> bytes:
    """The Workbook stream (in the mini stream) has its last mini sector chain back to its first."""
    out = bytearray(data)
    start, size = struct.unpack_from("<IQ", data, _workbook(data) + 116)
    struct.pack_into("<I", out, _at(header(data)["first_minifat"]) + 4 * (start + -(-size // MINI) - 1), start)
    return bytes(out)
