"""What a kept session costs Redis in memory, so `sessions.max_stored_mb` counts what Redis holds.

Redis holds more than the bytes it is given: each value is an allocation rounded up to the
allocator's size class (jemalloc, Redis's default, has four classes per doubling: a 17,000-byte
value takes 20,480), each hash field its own entry, and each session entries in the indexes,
a "was kept" marker and expiry bookkeeping. The bytes of the record and the dump alone are
~1.24x short of what Redis uses for ~17 KB sessions: counted so, Redis reaches its maxmemory
while the cap still has room, and evicts kept sessions.

So a save is checked against a conservative estimate (`session_estimate`: never below what
Redis then reports), and once written the session is counted at what Redis measures
(``MEMORY USAGE`` of its hash, allocator rounding included) plus `INDEX_BYTES`; markers are
counted at `MARKER_BYTES` each while they live. The constants were measured on Redis 7.0
(jemalloc 5.3) with margin: `bench/redis_bytes.py` compares what is counted with Redis's own
`used_memory` growth (within 0.93-1.001x from 2 KB to 1 MB sessions), and
tests/adversarial/test_redis_store.py holds that a Redis whose maxmemory is 15% above the cap
never evicts a kept session.
"""

from __future__ import annotations

#: Per session, outside its hash: entries in the two expiry indexes and the size table, the
#: key's expiry entry, and the bucket slots of those tables (which double as they grow).
INDEX_BYTES = 640
#: Per "was kept" marker (a member of one sorted set, with its bucket slots).
MARKER_BYTES = 256
#: The hash itself: its object, its table and bucket array, the key's name and keyspace entry.
_HASH_BYTES = 384
_FIELD_ENTRY_BYTES = 32


def allocation(size: int) -> int:
    """The size class jemalloc serves a request of `size` bytes from (16-byte steps up to 128 bytes,
    then four classes per doubling); a larger or equal figure for other allocators."""
    if size <= 8:
        return 8
    if size <= 128:
        return (size + 15) // 16 * 16
    spacing = 1 << ((size - 1).bit_length() - 3)
    return (size + spacing - 1) // spacing * spacing


def string_bytes(length: int) -> int:
    """A Redis string of `length` bytes: its header (3, 5 or 9 bytes), the text and a terminating NUL."""
    header = 3 if length < 256 else 5 if length < 65536 else 9
    return allocation(header + length + 1)


def session_estimate(key: str, fields: dict[str, bytes]) -> int:
    """What a session's hash with `fields` under `key`, and its index entries, will take at most."""
    total = _HASH_BYTES + string_bytes(len(key)) + INDEX_BYTES
    for name, value in fields.items():
        total += _FIELD_ENTRY_BYTES + string_bytes(len(name)) + string_bytes(len(value))
    return total


def chunks_estimate(key: str, fields: dict[str, int]) -> int:
    """What the hash of a session's dump chunks (field name -> value length) under `key` will take at most."""
    if not fields:
        return 0
    total = _HASH_BYTES + string_bytes(len(key))
    for name, length in fields.items():
        total += _FIELD_ENTRY_BYTES + string_bytes(len(name)) + string_bytes(length)
    return total
