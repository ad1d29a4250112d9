"""Interpreter dumps kept as content-defined chunks: a save writes what a call changed, not the dump.

A monty dump holds every variable and the source of every snippet run, and a call changes it in a
few places (even a read-only ``len(x)`` adds its source near the start and the end). FastCDC cuts
a dump where its content says, not at fixed offsets, so the stretches a call left alone cut into
the same chunks again and a store writes only the chunks it does not hold yet (a few per call,
~16 KB each, whatever the dump's size). A chunk is named by a keyed digest of its content
(`Signer.chunk_name`): the name authenticates the chunk (changed, it no longer matches its name)
and tells a reader of the store nothing of it; the record lists its chunks' names under the
record's own signature, so the record and its chunks verify together.

Each session's store entry (`DumpMemo`, held by the session's `Persistence`) remembers the split
it last wrote or read: a save of the same dump object (search, cite, a call that did not run
code) reuses it without cutting or hashing again, and a new dump hashes only the chunks whose
bytes differ from the previous dump's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from pyfastcdc import FastCDC

#: FastCDC's target chunk size: measured on a 21 MB dump, a read-only call then writes ~40 KB of
#: new chunks (64 KB averages write ~285 KB, 8 KB ones double the chunks to hash and list).
AVERAGE_BYTES = 16384
NAME_CHARS = 40
NAME = re.compile(r"[0-9a-f]{40}")
_PROBE = 32  # the bytes a chunk of the previous dump is looked up by

Namer = Callable[[memoryview], str]


@dataclass(frozen=True)
class Split:
    """A dump and its chunks: names in order, and where each ends in the dump."""

    blob: bytes
    names: tuple[str, ...]
    ends: tuple[int, ...]

    def pieces(self) -> Iterator[tuple[str, memoryview]]:
        view = memoryview(self.blob)
        start = 0
        for name, end in zip(self.names, self.ends, strict=True):
            yield name, view[start:end]
            start = end

    def listing(self) -> bytes:
        """The names, concatenated (what a record lists and signs)."""
        return "".join(self.names).encode()


class DumpMemo:
    """What a store last wrote or read of one session's dump, at which version (0: nothing known)."""

    def __init__(self) -> None:
        self.split: Split | None = None
        self.version = 0

    def remember(self, split: Split | None, version: int) -> None:
        self.split, self.version = split, version

    def held_at(self, version: int) -> frozenset[str]:
        """The chunk names the store holds for this session if it is at `version` (else none known)."""
        split = self.split
        return frozenset(split.names) if split is not None and self.version == version else frozenset()


def split(blob: bytes, namer: Namer, previous: Split | None = None) -> Split:
    """Cut `blob` into chunks and name them.

    With `previous` (the dump before this call), a stretch that starts with one of its chunks'
    bytes is that chunk again, taken as it is (a byte comparison: no cutting, no keyed hash); the
    cutter runs only over what changed, from where the last such stretch ended. (FastCDC decides a
    cut from the bytes since the chunk's start alone, so the chunks it would find there are the same.)
    """
    if previous is not None and previous.blob is blob:
        return previous
    known: dict[bytes, list[tuple[memoryview, str]]] = {}
    if previous is not None:
        for name, piece in previous.pieces():
            known.setdefault(bytes(piece[:_PROBE]), []).append((piece, name))
    view = memoryview(blob)
    names: list[str] = []
    ends: list[int] = []
    cutter: Iterator[Any] | None = None
    base = start = 0
    while start < len(blob):
        candidates = known.get(blob[start : start + _PROBE], ())
        same = next(((len(old), n) for old, n in candidates if blob.startswith(old, start)), None)
        if same is not None:
            end, name = start + same[0], same[1]
            cutter = None
        else:
            if cutter is None:
                cutter, base = iter(FastCDC(AVERAGE_BYTES).cut_buf(view[start:])), start
            chunk = next(cutter)
            end = base + chunk.offset + chunk.length
            name = namer(view[start:end])
        names.append(name)
        ends.append(end)
        start = end
    return Split(blob, tuple(names), tuple(ends))


def joined(pieces: list[bytes], names: tuple[str, ...]) -> Split:
    """The dump made of `pieces` (read back in order, already verified), with its split."""
    ends: list[int] = []
    total = 0
    for piece in pieces:
        total += len(piece)
        ends.append(total)
    return Split(b"".join(pieces), names, tuple(ends))


def parse_listing(raw: bytes | str) -> tuple[str, ...] | None:
    """The chunk names a record lists, or None when the listing is malformed."""
    text = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
    if len(text) % NAME_CHARS:
        return None
    names = tuple(text[i : i + NAME_CHARS] for i in range(0, len(text), NAME_CHARS))
    return names if all(NAME.fullmatch(n) for n in names) else None
