"""Kept sessions in Redis (`sessions.store = redis://HOST:PORT/DB`), shared by replicas.

Keys, all under one hash tag per deployment (``{ns}``, so a Redis Cluster keeps
them in one slot); ``<key>`` is the session's `SessionKey.storage`:

- ``mcpa:{ns}:s:<key>``       hash: v (version), mac, owner, rec (record JSON), blob (dump);
                              expires after the TTL, refreshed by every use
- ``mcpa:{ns}:kept:<key>``    "was kept" marker (outlives the session: expired vs never kept)
- ``mcpa:{ns}:idx`` / ``mcpa:{ns}:idx:<owner>``   sorted sets key -> expiry, for the bounds
- ``mcpa:{ns}:sz`` / ``mcpa:{ns}:bytes``   hash key -> bytes kept, and their running total
- ``mcpa:{ns}:lock:<key>``    a lease lock: one replica runs a session at a time

Saves are compare-and-set Lua scripts: a copy loaded at version n can only write n+1,
and the bounds are checked in the same atomic step. Locks are leases renewed by the
replica that holds them, so a killed replica's lock lapses within `LOCK_LEASE_SECONDS`.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import time
from typing import Any

import anyio
import redis.asyncio as aioredis
from redis.exceptions import RedisError, ResponseError

from mcp_analysis.redact import redact_url
from mcp_analysis.session.keys import SessionKey
from mcp_analysis.session.stores.base import (
    KEPT_MARKER_TTL_FACTOR,
    Limits,
    LockTimeout,
    SessionRecord,
    SessionStore,
    Signer,
    StoredSession,
    StoreFull,
    StoreUnavailable,
    VersionConflict,
    owner_digest,
)

log = logging.getLogger(__name__)

LOCK_LEASE_SECONDS = 10.0
_TIMEOUT_SECONDS = 5.0

# Forget expired sessions in the index and their sizes in the running total.
# KEYS[1] idx, KEYS[2] sz, KEYS[3] bytes; ARGV[1] now (ms).
_PRUNE = """
local function prune(idx, sz, total, now)
  local gone = redis.call('ZRANGEBYSCORE', idx, '-inf', now)
  for _, k in ipairs(gone) do
    local b = tonumber(redis.call('HGET', sz, k) or '0')
    if b > 0 then redis.call('DECRBY', total, b) end
    redis.call('HDEL', sz, k)
  end
  redis.call('ZREMRANGEBYSCORE', idx, '-inf', now)
end
"""

_COUNT = (
    _PRUNE
    + """
prune(KEYS[1], KEYS[2], KEYS[3], tonumber(ARGV[1]))
return redis.call('ZCARD', KEYS[1])
"""
)

_SAVE = (
    _PRUNE
    + """
local cur = tonumber(redis.call('HGET', KEYS[1], 'v') or '0')
if cur ~= tonumber(ARGV[1]) then return -1 end
local now = tonumber(ARGV[3])
prune(KEYS[3], KEYS[5], KEYS[6], now)
if cur == 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
  if redis.call('ZCARD', KEYS[3]) >= tonumber(ARGV[4]) then return -2 end
  if redis.call('ZCARD', KEYS[4]) >= tonumber(ARGV[5]) then return -3 end
end
local size = tonumber(ARGV[14])
local before = tonumber(redis.call('HGET', KEYS[5], ARGV[12]) or '0')
local held = tonumber(redis.call('GET', KEYS[6]) or '0') - before
if held + size > tonumber(ARGV[13]) then return -4 end
redis.call('HSET', KEYS[5], ARGV[12], size)
redis.call('INCRBY', KEYS[6], size - before)
local v = cur + 1
redis.call('HSET', KEYS[1], 'v', v, 'mac', ARGV[6], 'owner', ARGV[7], 'rec', ARGV[8])
if ARGV[10] == '1' then redis.call('HSET', KEYS[1], 'blob', ARGV[9]) else redis.call('HDEL', KEYS[1], 'blob') end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('SET', KEYS[2], '1', 'PX', ARGV[11])
local expiry = now + tonumber(ARGV[2])
redis.call('ZADD', KEYS[3], expiry, ARGV[12])
redis.call('ZADD', KEYS[4], expiry, ARGV[12])
return v
"""
)

_TOUCH = """
local v = redis.call('HGET', KEYS[1], 'v')
if not v then return false end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
local expiry = tonumber(ARGV[2]) + tonumber(ARGV[1])
redis.call('ZADD', KEYS[2], 'XX', expiry, ARGV[3])
local owner = redis.call('HGET', KEYS[1], 'owner')
if owner then redis.call('ZADD', ARGV[4] .. owner, 'XX', expiry, ARGV[3]) end
return v
"""

_DELETE = """
local owner = redis.call('HGET', KEYS[1], 'owner')
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
if owner then redis.call('ZREM', ARGV[2] .. owner, ARGV[1]) end
local b = tonumber(redis.call('HGET', KEYS[3], ARGV[1]) or '0')
if b > 0 then redis.call('DECRBY', KEYS[4], b) end
redis.call('HDEL', KEYS[3], ARGV[1])
return 1
"""

_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class RedisSessionStore(SessionStore):
    shared = True

    def __init__(self, url: str, signer: Signer, *, namespace: str) -> None:
        super().__init__(signer)
        self.description = redact_url(url)
        self._redis = aioredis.Redis.from_url(
            url,
            socket_timeout=_TIMEOUT_SECONDS,
            socket_connect_timeout=_TIMEOUT_SECONDS,
            health_check_interval=15,
        )
        self._prefix = f"mcpa:{{{namespace}}}:"
        self._save = self._redis.register_script(_SAVE)
        self._touch = self._redis.register_script(_TOUCH)
        self._delete = self._redis.register_script(_DELETE)
        self._count = self._redis.register_script(_COUNT)
        self._renew = self._redis.register_script(_RENEW)
        self._release = self._redis.register_script(_RELEASE)
        self._held: dict[str, str] = {}  # lock key -> token, renewed by renew_locks()

    def _k(self, kind: str, storage_key: str = "") -> str:
        return f"{self._prefix}{kind}{storage_key}"

    async def _call(self, coro: Any) -> Any:
        try:
            return await coro
        except ResponseError as exc:
            raise StoreUnavailable(f"{self.description} refused the command: {exc}") from exc
        except (RedisError, OSError) as exc:
            raise StoreUnavailable(f"{self.description} is unreachable ({type(exc).__name__}: {exc})") from exc

    # ------------------------------------------------------------ interface

    async def load(self, key: SessionKey) -> StoredSession | None:
        fields = await self._call(self._redis.hgetall(self._k("s:", key.storage)))
        if not fields or b"rec" not in fields:
            return None
        body = fields[b"rec"]
        blob = fields.get(b"blob")
        record = self._verified(key, fields.get(b"mac", b"").decode(), body, blob, f"stored session {key.storage}")
        if record is None:
            return None
        return StoredSession(record, blob, int(fields.get(b"v", b"1")))

    async def touch(self, key: SessionKey, ttl_seconds: float) -> int | None:
        version = await self._call(
            self._touch(
                keys=[self._k("s:", key.storage), self._k("idx")],
                args=[int(ttl_seconds * 1000), _now_ms(), key.storage, self._k("idx:")],
            )
        )
        return int(version) if version else None

    async def save(self, record: SessionRecord, blob: bytes | None, *, expected: int, limits: Limits) -> int:
        body = record.model_dump_json().encode()
        owner = owner_digest(record.owner)
        ttl_ms = int(limits.ttl_seconds * 1000)
        result = await self._call(
            self._save(
                keys=[
                    self._k("s:", record.key),
                    self._k("kept:", record.key),
                    self._k("idx"),
                    self._k("idx:", owner),
                    self._k("sz"),
                    self._k("bytes"),
                ],
                args=[
                    expected,
                    ttl_ms,
                    _now_ms(),
                    limits.max_stored,
                    limits.max_per_principal,
                    self.signer.mac(body, blob),
                    owner,
                    body,
                    blob or b"",
                    "1" if blob is not None else "0",
                    ttl_ms * KEPT_MARKER_TTL_FACTOR,
                    record.key,
                    limits.max_stored_bytes,
                    len(body) + (len(blob) if blob is not None else 0),
                ],
            )
        )
        code = int(result)
        if code == -1:
            raise VersionConflict(record.key)
        if code == -2:
            raise StoreFull("total", limits.max_stored)
        if code == -3:
            raise StoreFull("principal", limits.max_per_principal)
        if code == -4:
            raise StoreFull("bytes", limits.max_stored_bytes)
        return code

    async def delete(self, key: SessionKey) -> None:
        await self._call(
            self._delete(
                keys=[self._k("s:", key.storage), self._k("idx"), self._k("sz"), self._k("bytes")],
                args=[key.storage, self._k("idx:")],
            )
        )

    async def was_kept(self, key: SessionKey) -> bool:
        return bool(await self._call(self._redis.exists(self._k("kept:", key.storage))))

    async def count(self) -> int:
        keys = [self._k("idx"), self._k("sz"), self._k("bytes")]
        return int(await self._call(self._count(keys=keys, args=[_now_ms()])))

    async def ping(self) -> None:
        await self._call(self._redis.ping())

    async def close(self) -> None:
        for lock_key, token in list(self._held.items()):
            with contextlib.suppress(RedisError, OSError):
                await self._release(keys=[lock_key], args=[token])
        self._held.clear()
        await self._redis.aclose()

    # ---------------------------------------------------------------- locks

    async def acquire(self, key: SessionKey, *, wait: float) -> str:
        """Take the session's lease lock, waiting up to `wait` seconds; returns the token."""
        lock_key = self._k("lock:", key.storage)
        token = secrets.token_hex(12)
        deadline = time.monotonic() + wait
        delay = 0.02
        while True:
            taken = await self._call(self._redis.set(lock_key, token, nx=True, px=int(LOCK_LEASE_SECONDS * 1000)))
            if taken:
                self._held[lock_key] = token
                return token
            if time.monotonic() + delay > deadline:
                raise LockTimeout(key.storage)
            await anyio.sleep(delay)
            delay = min(delay * 2, 0.25)

    async def release(self, key: SessionKey, token: str) -> None:
        lock_key = self._k("lock:", key.storage)
        self._held.pop(lock_key, None)
        await self._call(self._release(keys=[lock_key], args=[token]))

    async def renew_locks(self) -> None:
        """Extend the leases this replica holds (called every few seconds)."""
        for lock_key, token in list(self._held.items()):
            renewed = await self._call(self._renew(keys=[lock_key], args=[token, int(LOCK_LEASE_SECONDS * 1000)]))
            if not renewed and self._held.get(lock_key) == token:
                log.warning("Lost the lock of %s (lease lapsed); its next save will be refused", lock_key)
                self._held.pop(lock_key, None)


def _now_ms() -> int:
    return int(time.time() * 1000)
