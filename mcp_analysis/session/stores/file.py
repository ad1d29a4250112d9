"""Kept sessions in a local directory (the default store: one server process).

Per session key, by the digest of its `SessionKey.storage`: ``<digest>.json`` (a header
line — version, owner digest, the names of the dump's chunks, HMAC over the record and those
names — then the record: key, owner, filter, AnalysisState, last use), ``<digest>.chunks/``
(the interpreter dump's chunks, one file each, named by their keyed digest: chunks.py) and
``<digest>.kept`` (an empty marker that outlives the session, so an expired handle is reported
as expired). A save writes the chunks the folder lacks, then the record (atomically), then
deletes the chunks no longer listed: killed at any point, the record on disk has all its
chunks, and what a killed save left is collected by the session's next save (or its expiry).
A load that finds a chunk gone (a save replaced the record meanwhile) reads the record again.
Records of earlier versions (the dump whole in ``<digest>.bin``) are still read. The HMAC key is
`sessions.secret`, else a key file kept in the directory (mode 0600): a tampered or
foreign file is ignored, never loaded. Files idle past the TTL go. The directory is one
the store owns (directory.py): it never changes the mode of, nor deletes anything in, a
directory it did not create, and deletes only files named as it names them. Several
replicas need the Redis store.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import secrets
import threading
import time
from pathlib import Path

import anyio

from mcp_analysis.session.keys import SessionKey
from mcp_analysis.session.stores import chunks
from mcp_analysis.session.stores.base import (
    KEPT_MARKER_TTL_FACTOR,
    Limits,
    SessionRecord,
    SessionStore,
    Signer,
    StoredSession,
    StoreFull,
    StoreUnavailable,
    VersionConflict,
    owner_digest,
)
from mcp_analysis.session.stores.chunks import DumpMemo, Split
from mcp_analysis.session.stores.directory import SECRET_FILE, is_session_file, owned_directory

log = logging.getLogger(__name__)

_CHUNKED = "kept-session-chunks"  # the signature's label for records whose dump is kept as chunks
_CHUNK_TEMPORARY = re.compile(r"\.[0-9a-f]{40}\.[0-9a-f]{8}\.tmp")


class FileSessionStore(SessionStore):
    shared = False

    def __init__(self, directory: Path, secret: bytes | None = None) -> None:
        directory = owned_directory(directory)
        self.directory = directory
        self.description = str(directory)
        if secret is None:
            key_file = directory / SECRET_FILE
            if not key_file.exists():
                fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as handle:
                    handle.write(secrets.token_bytes(32))
            secret = key_file.read_bytes()
        super().__init__(Signer(secret))
        self._mutex = threading.Lock()
        self._index: dict[str, tuple[str, int]] | None = None  # digest -> (owner digest, bytes on disk)

    # ------------------------------------------------------------------ paths

    def _paths(self, storage_key: str) -> tuple[Path, Path, Path]:
        digest = hashlib.sha256(storage_key.encode()).hexdigest()[:40]
        base = self.directory / digest
        return base.with_suffix(".json"), base.with_suffix(".bin"), base.with_suffix(".kept")

    @staticmethod
    def _header(path: Path) -> dict[str, object] | None:
        try:
            with open(path, "rb") as handle:
                return json.loads(handle.readline())
        except (OSError, ValueError):
            return None

    def _session_files(self, pattern: str) -> list[Path]:
        """The store's own files matching `pattern` (never another program's, whatever its name)."""
        return [path for path in self.directory.glob(pattern) if is_session_file(path)]

    def _ensure_index(self) -> dict[str, tuple[str, int]]:
        if self._index is None:
            index: dict[str, tuple[str, int]] = {}
            for path in self._session_files("*.json"):
                header = self._header(path)
                if header is not None:
                    dump = _int(header.get("dump_bytes")) if "chunks" in header else _size(path.with_suffix(".bin"))
                    index[path.stem] = (str(header.get("owner", "")), _size(path) + dump)
            self._index = index
        return self._index

    # ------------------------------------------------------------ interface

    async def load(self, key: SessionKey) -> StoredSession | None:
        return await anyio.to_thread.run_sync(self._load, key)

    async def touch(self, key: SessionKey, ttl_seconds: float) -> int | None:
        return await anyio.to_thread.run_sync(self._touch, key)

    async def save(
        self, record: SessionRecord, blob: bytes | None, *, expected: int, limits: Limits, memo: DumpMemo | None = None
    ) -> int:
        # Serialized here, on the event loop: another call may change the state while the thread writes.
        body = record.model_dump_json().encode()
        previous = memo.split if memo is not None else None
        split, version = await anyio.to_thread.run_sync(
            self._split_and_save, record.key, owner_digest(record.owner), body, blob, previous, expected, limits
        )
        if memo is not None:
            memo.remember(split, version)
        return version

    async def delete(self, key: SessionKey) -> None:
        await anyio.to_thread.run_sync(self._delete, key)

    async def was_kept(self, key: SessionKey) -> bool:
        return any(p.exists() for p in self._paths(key.storage)[::2])

    async def count(self) -> int:
        return await anyio.to_thread.run_sync(lambda: len(self._ensure_index()))

    async def expire(self, ttl_seconds: float) -> int:
        return await anyio.to_thread.run_sync(self._expire, ttl_seconds)

    def size_hint(self, key: SessionKey) -> int | None:
        index = self._index  # built off the event loop (count, save); not read from disk here
        entry = index.get(self._paths(key.storage)[0].stem) if index is not None else None
        return entry[1] if entry is not None else None

    # ----------------------------------------------------------- blocking I/O

    def _load(self, key: SessionKey) -> StoredSession | None:
        record_path, blob_path, _ = self._paths(key.storage)
        for _attempt in range(2):  # a save may replace the record (and drop its chunks) while this reads
            try:
                with open(record_path, "rb") as handle:
                    header = json.loads(handle.readline())
                    body = handle.read()
                if "chunks" not in header:  # kept whole, by an earlier version
                    blob = blob_path.read_bytes() if blob_path.exists() else None
                    where = f"session file {record_path.name}"
                    record = self._verified(key, str(header.get("mac", "")), body, blob, where)
                    return StoredSession(record, blob, int(header.get("version", 1))) if record is not None else None
                return self._load_chunked(key, record_path, header, body)
            except FileNotFoundError:
                continue
            except (OSError, ValueError):
                return None
        return None

    def _load_chunked(
        self, key: SessionKey, record_path: Path, header: dict[str, object], body: bytes
    ) -> StoredSession | None:
        """A record whose dump is kept as chunks; FileNotFoundError when one is gone (read again)."""
        where = f"session file {record_path.name}"
        listing = str(header.get("chunks", ""))
        names = chunks.parse_listing(listing)
        if names is None or not self.signer.sealed(str(header.get("mac", "")), _CHUNKED, body, listing.encode()):
            log.warning("Ignoring %s: its signature does not match", where)
            return None
        folder = record_path.with_suffix(".chunks")
        pieces = [(folder / name).read_bytes() for name in names]
        if any(self.signer.chunk_name(piece) != name for piece, name in zip(pieces, names, strict=True)):
            log.warning("Ignoring %s: a chunk of its interpreter state was changed on disk", where)
            return None
        record = self._verified_body(key, body)
        if record is None:
            return None
        split = chunks.joined(pieces, names) if names else None
        return StoredSession(record, split.blob if split else None, int(str(header.get("version", 1))), split)

    def _touch(self, key: SessionKey) -> int | None:
        record_path = self._paths(key.storage)[0]
        header = self._header(record_path)
        if header is None:
            return None
        try:
            os.utime(record_path)
        except OSError:
            return None
        return int(header.get("version", 1))

    def _split_and_save(
        self,
        storage_key: str,
        owner: str,
        body: bytes,
        blob: bytes | None,
        previous: Split | None,
        expected: int,
        limits: Limits,
    ) -> tuple[Split | None, int]:
        split = chunks.split(blob, self.signer.chunk_name, previous) if blob is not None else None
        return split, self._save(storage_key, owner, body, split, expected, limits)

    def _save(
        self, storage_key: str, owner: str, body: bytes, split: Split | None, expected: int, limits: Limits
    ) -> int:
        record_path, blob_path, kept_path = self._paths(storage_key)
        folder = record_path.with_suffix(".chunks")
        with self._mutex:
            header = self._header(record_path)
            current = int(header.get("version", 1)) if header is not None else 0
            if current != expected:
                raise VersionConflict(storage_key)
            index = self._ensure_index()
            if current == 0:
                if len(index) >= limits.max_stored:
                    raise StoreFull("total", limits.max_stored)
                if sum(1 for o, _ in index.values() if o == owner) >= limits.max_per_principal:
                    raise StoreFull("principal", limits.max_per_principal)
            version = current + 1
            listing = split.listing() if split is not None else b""
            dump = len(split.blob) if split is not None else 0
            fields = {"version": version, "owner": owner, "mac": self.signer.seal(_CHUNKED, body, listing)}
            head = json.dumps({**fields, "dump_bytes": dump, "chunks": listing.decode()}).encode()
            size = len(head) + 1 + len(body) + dump
            held = sum(b for _, b in index.values()) - index.get(record_path.stem, ("", 0))[1]
            if held + size > limits.max_stored_bytes:
                raise StoreFull("bytes", limits.max_stored_bytes)
            try:
                if split is not None:
                    _write_chunks(folder, split)
                _atomic_write(record_path, head + b"\n" + body)
                kept_path.touch()
            except OSError as exc:
                raise StoreUnavailable(f"cannot write to {self.directory}: {exc}") from exc
            blob_path.unlink(missing_ok=True)  # an earlier version's whole dump
            _drop_chunks(folder, frozenset(split.names) if split is not None else frozenset())
            index[record_path.stem] = (owner, size)
            return version

    def _delete(self, key: SessionKey) -> None:
        record_path, blob_path, _ = self._paths(key.storage)
        with self._mutex:
            record_path.unlink(missing_ok=True)
            blob_path.unlink(missing_ok=True)
            _drop_chunks(record_path.with_suffix(".chunks"), frozenset())
            if self._index is not None:
                self._index.pop(record_path.stem, None)

    def _expire(self, ttl_seconds: float) -> int:
        """Delete sessions idle longer than the TTL (and markers much older); returns how many went."""
        now = time.time()
        removed = 0
        with self._mutex:
            for path in self._session_files("*.json"):
                try:
                    if path.stat().st_mtime < now - ttl_seconds:
                        path.unlink(missing_ok=True)
                        path.with_suffix(".bin").unlink(missing_ok=True)
                        _drop_chunks(path.with_suffix(".chunks"), frozenset())
                        if self._index is not None:
                            self._index.pop(path.stem, None)
                        removed += 1
                except OSError:
                    continue
            for path in self._session_files("*.kept"):
                try:
                    if path.stat().st_mtime < now - ttl_seconds * KEPT_MARKER_TTL_FACTOR:
                        path.unlink(missing_ok=True)
                except OSError:
                    continue
            # A record deleted by a process killed before its chunks. Another process may be writing a new
            # session's first chunks (its record comes after them): only a folder idle for the TTL goes.
            for folder in self.directory.glob("*.chunks"):
                try:
                    idle = folder.stat().st_mtime < now - ttl_seconds
                except OSError:
                    continue
                if idle and chunks.NAME.fullmatch(folder.stem) and not folder.with_suffix(".json").exists():
                    _drop_chunks(folder, frozenset())
        return removed


def _write_chunks(folder: Path, split: Split) -> None:
    """Write the chunks `folder` lacks (each atomically: a chunk file is whole or absent)."""
    if not folder.is_dir():
        folder.mkdir(mode=0o700)
    present = {entry.name for entry in folder.iterdir()}
    for name, piece in split.pieces():
        if name not in present:
            _atomic_write(folder / name, piece)
            present.add(name)


def _drop_chunks(folder: Path, keep: frozenset[str]) -> None:
    """Delete the chunks (and write temporaries) in `folder` not in `keep`; the folder too when empty."""
    try:
        entries = list(folder.iterdir())
    except OSError:
        return
    for entry in entries:
        if entry.name not in keep and (chunks.NAME.fullmatch(entry.name) or _CHUNK_TEMPORARY.fullmatch(entry.name)):
            entry.unlink(missing_ok=True)
    if not keep:
        with contextlib.suppress(OSError):
            folder.rmdir()


def _int(value: object) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _atomic_write(path: Path, data: bytes | memoryview) -> None:
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    tmp.replace(path)
