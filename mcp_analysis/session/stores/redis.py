"""Kept sessions in Redis (`sessions.store = redis://HOST:PORT/DB`), shared by replicas.

Keys, all under one hash tag per deployment (``{ns}``, so a Redis Cluster keeps them in one
slot); ``<d>`` is a keyed digest of the session's `SessionKey.storage` (a reader of Redis
learns no handle and no principal name from the key names):

- ``mcpa:{ns}:r2:s:<d>``      hash: the sealed record (sealed.py): v, f, k, owner, mac, rec, c;
                              expires after the TTL, refreshed by every use
- ``mcpa:{ns}:r2:c:<d>``      hash: the interpreter dump's chunks (chunks.py), sealed; a save sends
                              only those this hash lacks and drops those the record no longer lists
- ``mcpa:{ns}:r2:idx`` / ``idx:<owner>``   sorted sets <d> -> expiry, for the bounds
- ``mcpa:{ns}:r2:sz`` / ``bytes``   hash <d> -> bytes Redis holds for it, and their running total
- ``mcpa:{ns}:r2:kept``       sorted set <d> -> until when "it was kept" is remembered
- ``mcpa:{ns}:r2:lock:<d>``   a lease lock: one replica runs a session at a time
- ``mcpa:{ns}:r2:clock``      the counter every save takes its version from
- ``mcpa:{ns}:r2:epoch``      this store's life: a new random id once Redis lost its data

Versions come from one counter, so a session's versions only grow, across expiry and
re-creation too; each save is a compare-and-set script that also checks the bounds, and
counts the session at what Redis really holds (redis_memory.py). Records are sealed
(sealed.py): signed over key, version and epoch, encrypted with AES-GCM unless
`sessions.encrypt` is off. Locks are leases renewed by the replica that holds them, so a
killed replica's lock lapses within `sessions.lock_lease_seconds`. A Redis at its maxmemory refuses
writes: that is `StoreOutOfMemory` (full), never "unreachable". Records written by earlier
versions of mcp-analysis live under ``mcpa:{ns}:`` without ``r2:``: never read (their
signatures do not cover the version, so they cannot be told from a replay), they expire.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
from collections.abc import Awaitable
from typing import Any

import anyio
import redis.asyncio as aioredis
from redis.asyncio.lock import Lock
from redis.exceptions import LockNotOwnedError, OutOfMemoryError, RedisError, ResponseError

from mcp_analysis.redact import Redactor
from mcp_analysis.session.keys import KeyKind, SessionKey
from mcp_analysis.session.stores import chunks
from mcp_analysis.session.stores import redis_scripts as scripts
from mcp_analysis.session.stores.base import (
    EPOCH_BYTES,
    KEPT_MARKER_TTL_FACTOR,
    Limits,
    LockTimeout,
    RecordRefused,
    SessionRecord,
    SessionStore,
    Signer,
    StoredSession,
    StoreFull,
    StoreOutOfMemory,
    StoreReset,
    StoreUnavailable,
    VersionConflict,
    owner_label,
)
from mcp_analysis.session.stores.chunks import DumpMemo, Split
from mcp_analysis.session.stores.cipher import RecordCipher
from mcp_analysis.session.stores.redis_memory import INDEX_BYTES, MARKER_BYTES, chunks_estimate, session_estimate
from mcp_analysis.session.stores.sealed import Sealer, SeenVersions

log = logging.getLogger(__name__)

LOCK_POLL_SECONDS = 0.05  # how often a call waiting for a busy session tries its lock again
_TIMEOUT_SECONDS = 5.0
_FULL = -4
_SPLIT_INLINE = 1 << 20  # a smaller dump is cut on the event loop (a thread's hop costs more)
_SAVE_ERRORS = {-2: "total", -3: "principal", _FULL: "bytes"}


class RedisSessionStore(SessionStore):
    shared = True

    def __init__(
        self,
        url: str,
        signer: Signer,
        *,
        namespace: str,
        cipher: RecordCipher | None = None,
        remember: int = 10_000,
        lease_seconds: float = 10.0,
    ) -> None:
        super().__init__(signer)
        self.lease_seconds = lease_seconds  # sessions.lock_lease_seconds
        self._redact = Redactor(url)
        self.description = self._redact.url
        self._redis = aioredis.Redis.from_url(
            url,
            socket_timeout=_TIMEOUT_SECONDS,
            socket_connect_timeout=_TIMEOUT_SECONDS,
            health_check_interval=15,
        )
        self._prefix = f"mcpa:{{{namespace}}}:r2:"
        self._sealer = Sealer(signer, cipher)
        self._seen = SeenVersions(remember)
        self._epoch: str | None = None
        self._scripts = {
            name: self._redis.register_script(getattr(scripts, name)) for name in ("SAVE", "TOUCH", "DELETE", "COUNT")
        }
        self._held: dict[str, Lock] = {}  # lock key -> the lease this replica holds, renewed by renew_locks()

    def _k(self, kind: str, member: str = "") -> str:
        return f"{self._prefix}{kind}{member}"

    def member(self, key: SessionKey) -> str:
        """The name `key` has in Redis (a keyed digest: tells a reader nothing)."""
        return self.signer.digest("session-key", key.storage)

    def redis_key(self, key: SessionKey) -> str:
        """The Redis key of `key`'s record."""
        return self._k("s:", self.member(key))

    async def _call(self, coro: Any) -> Any:
        try:
            return await coro
        except OutOfMemoryError as exc:
            raise StoreOutOfMemory(
                f"{self.description} refused to keep more: it reached its maxmemory ({self._redact(str(exc))})"
            ) from exc
        except ResponseError as exc:
            raise StoreUnavailable(f"{self.description} refused the command: {self._redact(str(exc))}") from exc
        except (RedisError, OSError) as exc:
            detail = self._redact(str(exc))
            raise StoreUnavailable(f"{self.description} is unreachable ({type(exc).__name__}: {detail})") from exc

    # ---------------------------------------------------------------- epoch

    async def epoch(self) -> str:
        """This store's current epoch, made when missing (a new or emptied Redis); learns a change."""
        current = await self._call(self._redis.get(self._k("epoch")))
        if current is None:
            await self._call(self._redis.set(self._k("epoch"), secrets.token_hex(EPOCH_BYTES), nx=True))
            current = await self._call(self._redis.get(self._k("epoch")))
        value = current.decode() if isinstance(current, bytes) else str(current)
        if value != self._epoch:
            if self._epoch is not None:
                log.warning(
                    "The session store %s lost its data (restarted without persistence, or flushed): sessions "
                    "kept before are gone, and their handles are answered as unknown or expired",
                    self.description,
                )
            self._epoch = value
            self._seen.clear()
            with contextlib.suppress(ValueError):
                self.signer.epoch = bytes.fromhex(value)
        return value

    async def _known_epoch(self) -> str:
        return self._epoch if self._epoch is not None else await self.epoch()

    # ------------------------------------------------------------ interface

    async def load(self, key: SessionKey) -> StoredSession | None:
        member = self.member(key)
        async with self._redis.pipeline(transaction=True) as both:  # the record and its chunks, as one saved them
            both.hgetall(self._k("s:", member)).hgetall(self._k("c:", member))
            fields, pieces = await self._call(both.execute())
        if not fields:
            return None
        epoch = await self._known_epoch()
        try:
            try:
                stored = self._sealer.open(key.storage, fields, epoch, self._seen.get(member), pieces)
            except RecordRefused:
                if await self.epoch() == epoch:  # not merely an epoch this replica had not learned yet
                    raise
                stored = self._sealer.open(key.storage, fields, self._epoch or epoch, self._seen.get(member), pieces)
        except RecordRefused as refused:
            log.warning("Not loading the kept session %s: %s", member, refused.reason)
            raise
        self._seen.saw(member, stored.version)
        return stored

    async def touch(self, key: SessionKey, ttl_seconds: float) -> int | None:
        version = await self._call(
            self._scripts["TOUCH"](
                keys=[self.redis_key(key), self._k("idx"), self._k("c:", self.member(key))],
                args=[int(ttl_seconds * 1000), self.member(key), self._k("idx:")],
            )
        )
        return None if version is None else int(version)

    async def save(
        self, record: SessionRecord, blob: bytes | None, *, expected: int, limits: Limits, memo: DumpMemo | None = None
    ) -> int:
        body = record.model_dump_json().encode()
        member = self.signer.digest("session-key", record.key)
        owner = self.signer.digest("owner", owner_label(record.owner), 16)
        previous = memo.split if memo is not None else None
        split = None
        if blob is not None and len(blob) > _SPLIT_INLINE:
            split = await anyio.to_thread.run_sync(chunks.split, blob, self.signer.chunk_name, previous)
        elif blob is not None:
            split = chunks.split(blob, self.signer.chunk_name, previous)
        held = memo.held_at(expected) if memo is not None else frozenset()
        for _ in range(2):
            version = int(await self._call(self._redis.incr(self._k("clock"))))
            epoch = await self._known_epoch()
            fields = self._sealer.seal(record.key, version, epoch, owner, body, split.listing() if split else None)
            code = await self._save_fields(member, owner, epoch, fields, (record.key, split, held), expected, limits)
            if code == -6:  # the store lacks chunks this replica took it to hold (evicted, or a key change)
                code = await self._save_fields(
                    member, owner, epoch, fields, (record.key, split, frozenset()), expected, limits
                )
            if code != -5:
                break
            await self.epoch()  # the store lost its data: a new session is kept in its new life
            if expected != 0:
                raise StoreReset(record.key)
        if code == -1:
            raise VersionConflict(record.key)
        if code in _SAVE_ERRORS:
            scope = _SAVE_ERRORS[code]
            bound = {"total": limits.max_stored, "principal": limits.max_per_principal}
            raise StoreFull(scope, bound.get(scope, limits.max_stored_bytes))
        if code < 0:
            raise StoreReset(record.key)
        self._seen.saw(member, code)
        if memo is not None:
            memo.remember(split, code)
        return code

    def _chunk_args(self, storage: str, split: Split | None, held: frozenset[str]) -> tuple[list[bytes | str], int]:
        """The fields and values of the chunks to send (those not in `held`), and what all of them take in Redis."""
        if split is None:
            return [], 0
        args: list[bytes | str] = []
        sizes: dict[str, int] = {}
        overhead = self._sealer.cipher.overhead() if self._sealer.cipher is not None else 0
        for name, piece in split.pieces():
            field = self._sealer.chunk_field(name)
            sizes[field] = len(piece) + overhead
            if name not in held:
                args += [field, self._sealer.seal_chunk(storage, name, piece)]
        return args, chunks_estimate(self._k("c:", "x" * 32), sizes)

    async def _save_fields(
        self,
        member: str,
        owner: str,
        epoch: str,
        fields: dict[str, bytes],
        dump: tuple[str, Split | None, frozenset[str]],
        expected: int,
        limits: Limits,
    ) -> int:
        ttl_ms = int(limits.ttl_seconds * 1000)
        sent, chunk_bytes = self._chunk_args(*dump)
        estimate = session_estimate(self._k("s:", member), fields) + chunk_bytes
        keys = ["s:" + member, "idx", "idx:" + owner, "sz", "bytes", "kept", "epoch", "c:" + member]
        args = [
            expected,
            int(fields["v"]),
            ttl_ms,
            ttl_ms * KEPT_MARKER_TTL_FACTOR,
            limits.max_stored,
            limits.max_per_principal,
            limits.max_stored_bytes,
            member,
            epoch,
            estimate,
            INDEX_BYTES,
            MARKER_BYTES,
            owner,
            fields["f"],
            fields["k"],
            fields["mac"],
            fields["rec"],
            "1" if "c" in fields else "0",
            fields.get("c", b""),
            *sent,
        ]
        return int(await self._call(self._scripts["SAVE"](keys=[self._k(k) for k in keys], args=args)))

    async def delete(self, key: SessionKey) -> None:
        member = self.member(key)
        await self._call(
            self._scripts["DELETE"](
                keys=[self._k("s:", member), self._k("idx"), self._k("sz"), self._k("bytes"), self._k("c:", member)],
                args=[member, self._k("idx:")],
            )
        )

    async def was_kept(self, key: SessionKey) -> bool:
        """Kept (its marker lives), or named by a handle of an earlier epoch: kept, perhaps, then lost."""
        marker = await self._call(self._redis.zscore(self._k("kept"), self.member(key)))
        if marker is not None:
            return True
        if key.kind is not KeyKind.HANDLE:
            return False
        issued_in = self.signer.handle_epoch(key.value)
        return issued_in is None or issued_in.hex() != await self.epoch()

    async def count(self) -> int:
        return (await self.usage())[0]

    async def usage(self) -> tuple[int, int]:
        """Sessions kept now, and the bytes counted for them and the markers (what the byte cap sees)."""
        keys = [self._k("idx"), self._k("sz"), self._k("bytes"), self._k("kept")]
        sessions, held, markers = await self._call(self._scripts["COUNT"](keys=keys, args=[]))
        return int(sessions), int(held) + int(markers) * MARKER_BYTES

    async def ping(self) -> None:
        await self._call(self._redis.ping())
        await self.epoch()

    async def close(self) -> None:
        for lock in list(self._held.values()):
            with contextlib.suppress(RedisError, OSError):
                await lock.release()
        self._held.clear()
        await self._redis.aclose()

    # ---------------------------------------------------------------- locks

    def _lock(self, lock_key: str) -> Lock:
        """redis-py's lease lock (SET NX PX, compare-and-delete, compare-and-extend scripts); its token
        lives on the object, not in a thread-local: one event loop runs every call."""
        return self._redis.lock(lock_key, timeout=self.lease_seconds, sleep=LOCK_POLL_SECONDS, thread_local=False)

    @staticmethod
    async def _owned(step: Awaitable[Any]) -> bool:
        """Run a release or renewal: False when the lease had lapsed already (not a store error)."""
        try:
            await step
        except LockNotOwnedError:
            return False
        return True

    async def acquire(self, key: SessionKey, *, wait: float) -> str:
        """Take the session's lease lock, waiting up to `wait` seconds; returns the token."""
        lock_key = self._k("lock:", self.member(key))
        lock = self._lock(lock_key)
        token = secrets.token_hex(12)
        if not await self._call(lock.acquire(blocking_timeout=wait, token=token)):
            raise LockTimeout(key.storage)
        self._held[lock_key] = lock
        return token

    async def release(self, key: SessionKey, token: str) -> None:
        lock_key = self._k("lock:", self.member(key))
        self._held.pop(lock_key, None)
        await self._call(self._owned(self._lock(lock_key).do_release(token)))

    async def renew_locks(self) -> None:
        """Extend the leases this replica holds (called every few seconds)."""
        for lock_key, lock in list(self._held.items()):
            renewed = await self._call(self._owned(lock.reacquire()))
            if not renewed and self._held.get(lock_key) is lock:
                log.warning("Lost the lock of %s (lease lapsed); its next save will be refused", lock_key)
                self._held.pop(lock_key, None)
