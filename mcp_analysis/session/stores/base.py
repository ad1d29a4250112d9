"""What every session store is: the record it keeps, its signature, its bounds, its errors.

Two implementations: a local directory (`file.py`, one server process; the default) and
Redis (`redis.py`, `sessions.store = redis://...`, shared by replicas); `factory.py` picks
the configured one. Both keep, per session key (`SessionKey.storage`), a
signed record (owner, filter, AnalysisState) plus the interpreter dump, a version
number that every save bumps (compare-and-set: a save from a stale copy fails instead
of overwriting newer state), a TTL refreshed on use, and a small "was kept" marker that
outlives the session so an expired handle is reported as expired.

Records and dumps are authenticated with an HMAC key: monty must only load dumps this
deployment produced. Handles issued to sessionless clients are signed with the same
key, so a server can tell its own never-kept handle from a made-up or mangled one. A
handle also names the store's *epoch* (a random id the store keeps; a Redis restarted
without persistence has a new one): a handle from another epoch whose session is not
found was kept, then lost with the store's data, so it is reported unknown or expired
instead of starting afresh.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import secrets
from abc import ABC, abstractmethod
from dataclasses import dataclass

from pydantic import BaseModel

from mcp_analysis.session.keys import SessionKey
from mcp_analysis.session.state import AnalysisState
from mcp_analysis.session.stores.chunks import DumpMemo, Split

log = logging.getLogger(__name__)

KEPT_MARKER_TTL_FACTOR = 24  # "was kept" markers outlive the session by this factor of the TTL
EPOCH_BYTES = 6
_HANDLE_NONCE = 12
_HANDLE_TAG = 6
_HANDLE_LENGTH = 2 + 4 * (_HANDLE_NONCE + EPOCH_BYTES + _HANDLE_TAG) // 3  # "s_" + 32
_EARLIER_HANDLE_LENGTH = 26  # "s_" + 12-byte nonce + 6-byte tag, without an epoch


class SessionRecord(BaseModel):
    key: str  # SessionKey.storage: a record is only ever loaded under the key it was saved for
    session_id: str
    owner: str | None = None
    document_filter: str | None = None
    state: AnalysisState
    last_used: float


@dataclass
class StoredSession:
    record: SessionRecord
    blob: bytes | None
    version: int
    #: The dump's chunks as the store holds them (None: kept whole by an earlier version, or no dump).
    split: Split | None = None


@dataclass(frozen=True)
class Limits:
    """Bounds checked atomically on save: counts when a new session is first kept, bytes on every save."""

    ttl_seconds: float
    max_stored: int
    max_per_principal: int
    max_stored_bytes: int


class VersionConflict(Exception):
    """The stored version is not the one this copy was loaded at (another call saved first)."""


class StoreFull(Exception):
    """A bound would be exceeded; `scope` is 'principal', 'total' or 'bytes'."""

    def __init__(self, scope: str, limit: int) -> None:
        super().__init__(scope)
        self.scope = scope
        self.limit = limit


class StoreUnavailable(Exception):
    """The store cannot be reached (connection refused, timeout, read-only replica...)."""


class StoreOutOfMemory(StoreUnavailable):
    """The store answers but refuses to keep more (Redis at its maxmemory with noeviction): full, not down."""


class StoreReset(Exception):
    """The store lost its data (a new epoch) while a session kept in it was being saved."""


class RecordRefused(Exception):
    """A stored record exists but is not loaded; `reason` says why (for the client), `version` is the
    stored version a new session replacing it must overwrite (-1: not a number)."""

    def __init__(self, reason: str, version: int) -> None:
        super().__init__(reason)
        self.reason = reason
        self.version = version


class LockTimeout(Exception):
    """The session's cross-replica lock was not released within the wait."""


def owner_label(owner: str | None) -> str:
    """Who owns a session, as signed handles and stored owner digests spell it (a stable format)."""
    return "anonymous" if owner is None else SessionKey.principal(owner).storage


def owner_digest(owner: str | None) -> str:
    """How a store files a session's owner (for the per-principal bound): short, and no principal name."""
    return hashlib.sha256(owner_label(owner).encode()).hexdigest()[:12]


class Signer:
    """HMAC over records, dumps and handles; keyed digests of names a store must not show."""

    def __init__(self, secret: bytes, epoch: bytes | None = None) -> None:
        self._secret = secret
        self._chunk_key = hmac.new(secret, b"dump-chunk-name", hashlib.sha256).digest()
        #: The store's epoch, named by every new handle (stores with one set it when they learn it).
        self.epoch = epoch if epoch is not None else secrets.token_bytes(EPOCH_BYTES)

    def mac(self, body: bytes, blob: bytes | None) -> str:
        mac = hmac.new(self._secret, body, hashlib.sha256)
        mac.update(b"\x00" + (blob or b""))
        return mac.hexdigest()

    def verify(self, mac: str, body: bytes, blob: bytes | None) -> bool:
        return hmac.compare_digest(mac, self.mac(body, blob))

    def chunk_name(self, piece: bytes | memoryview) -> str:
        """A dump chunk's name: a keyed digest of its content (BLAKE2b, keyed apart from the MACs)."""
        return hashlib.blake2b(piece, key=self._chunk_key, digest_size=20).hexdigest()

    def seal(self, label: str, *fields: bytes) -> str:
        """HMAC over `fields`, each length-prefixed (no field can run into the next), under `label`."""
        mac = hmac.new(self._secret, label.encode() + b"\x00", hashlib.sha256)
        for field in fields:
            mac.update(len(field).to_bytes(8, "big") + field)
        return mac.hexdigest()

    def sealed(self, mac: str, label: str, *fields: bytes) -> bool:
        return hmac.compare_digest(mac.encode(), self.seal(label, *fields).encode())

    def digest(self, label: str, text: str, length: int = 32) -> str:
        """A keyed digest of `text`: stable, and tells a reader of the store nothing (not even by guessing)."""
        return hmac.new(self._secret, f"{label}\x00{text}".encode(), hashlib.sha256).hexdigest()[:length]

    def new_handle(self, owner: str | None) -> str:
        """``s_`` + 32 url-safe characters: 12 random bytes, the store's epoch, and a 6-byte tag binding
        both to `owner`."""
        nonce = secrets.token_bytes(_HANDLE_NONCE) + self.epoch
        return "s_" + base64.urlsafe_b64encode(nonce + self._tag(nonce, owner)).decode()

    def issued(self, handle: str, owner: str | None) -> bool:
        """Whether this deployment issued `handle` to `owner` (a typo, a made-up id or another
        principal's id is not: replayed by someone else, it must not start a session under that id).
        Handles without an epoch (26 characters, as earlier versions issued them) stay ours."""
        raw = _handle_bytes(handle, _HANDLE_LENGTH)
        if raw is not None:
            nonce, tag = raw[:-_HANDLE_TAG], raw[-_HANDLE_TAG:]
            return hmac.compare_digest(tag, self._tag(nonce, owner))
        raw = _handle_bytes(handle, _EARLIER_HANDLE_LENGTH)
        return raw is not None and hmac.compare_digest(raw[12:], self._tag(raw[:12], owner, label=b"handle"))

    def handle_epoch(self, handle: str) -> bytes | None:
        """The store epoch a handle of ours was issued in (None for anything else, and for a
        handle without one: a store with epochs cannot tell whether its session was kept)."""
        raw = _handle_bytes(handle, _HANDLE_LENGTH)
        return raw[_HANDLE_NONCE:-_HANDLE_TAG] if raw is not None else None

    def _tag(self, nonce: bytes, owner: str | None, label: bytes = b"handle-2") -> bytes:
        who = owner_label(owner).encode()
        return hmac.new(self._secret, label + b"\x00" + who + b"\x00" + nonce, hashlib.sha256).digest()[:_HANDLE_TAG]


def _handle_bytes(handle: str, length: int) -> bytes | None:
    if not handle.startswith("s_") or len(handle) != length:
        return None
    try:
        return base64.urlsafe_b64decode(handle[2:].encode())
    except (ValueError, UnicodeEncodeError):
        return None


class SessionStore(ABC):
    """Kept sessions by key. Every method may raise StoreUnavailable."""

    #: Several processes use this store: check the version on every call, lock across processes.
    shared: bool = False
    #: Where it is, for messages (no password).
    description: str = ""

    def __init__(self, signer: Signer) -> None:
        self.signer = signer

    def _verified(self, key: SessionKey, mac: str, body: bytes, blob: bytes | None, where: str) -> SessionRecord | None:
        """The record in `body` if the signature over it and `blob` holds and it is `key`'s, else None."""
        if not self.signer.verify(mac, body, blob):
            log.warning("Ignoring %s: its signature does not match", where)
            return None
        return self._verified_body(key, body)

    @staticmethod
    def _verified_body(key: SessionKey, body: bytes) -> SessionRecord | None:
        """The record in `body` (its signature checked already) if it is `key`'s, else None."""
        try:
            record = SessionRecord.model_validate_json(body)
        except ValueError:
            return None
        return record if record.key == key.storage else None

    @abstractmethod
    async def load(self, key: SessionKey) -> StoredSession | None:
        """The verified session, or None (missing, expired, unreadable or failing its signature).

        A store that can say why it does not load a record it holds raises RecordRefused instead."""

    @abstractmethod
    async def touch(self, key: SessionKey, ttl_seconds: float) -> int | None:
        """Refresh the TTL; return the current version (None when the key is not stored)."""

    @abstractmethod
    async def save(
        self, record: SessionRecord, blob: bytes | None, *, expected: int, limits: Limits, memo: DumpMemo | None = None
    ) -> int:
        """Store if the current version is `expected` (0: not stored yet); return the new version.

        The dump is kept as chunks (chunks.py): only those the store does not hold are written.
        `memo` (the session's) tells which it holds at `expected` and learns the new split.
        Raises VersionConflict, or StoreFull: a new session over a count bound, or any save that
        would take the store past `limits.max_stored_bytes`.
        """

    @abstractmethod
    async def delete(self, key: SessionKey) -> None: ...

    @abstractmethod
    async def was_kept(self, key: SessionKey) -> bool:
        """Whether a session with this key was stored at some point (within the marker's lifetime)."""

    @abstractmethod
    async def count(self) -> int:
        """Sessions stored now."""

    async def expire(self, ttl_seconds: float) -> int:
        """Drop sessions idle past the TTL (stores without native expiry); returns how many went."""
        return 0

    def size_hint(self, key: SessionKey) -> int | None:
        """Bytes `key`'s stored session takes, if known without a round trip (sizes the memory a load takes)."""
        return None

    async def ping(self) -> None:
        """Raise StoreUnavailable if the store cannot be reached."""
        return None

    async def acquire(self, key: SessionKey, *, wait: float) -> str:
        """Exclusive use of `key` across processes, waiting up to `wait` s (LockTimeout); returns a token.

        In-process stores need no cross-process lock (the manager serializes calls itself)."""
        return ""

    async def release(self, key: SessionKey, token: str) -> None:
        return None

    async def renew_locks(self) -> None:
        """Keep the locks this process holds (lease-based stores)."""
        return None

    async def close(self) -> None:
        return None
