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
key, so a server can tell its own never-kept handle from a made-up or mangled one.
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

log = logging.getLogger(__name__)

KEPT_MARKER_TTL_FACTOR = 24  # "was kept" markers outlive the session by this factor of the TTL


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


class LockTimeout(Exception):
    """The session's cross-replica lock was not released within the wait."""


def owner_label(owner: str | None) -> str:
    """Who owns a session, as signed handles and stored owner digests spell it (a stable format)."""
    return "anonymous" if owner is None else SessionKey.principal(owner).storage


def owner_digest(owner: str | None) -> str:
    """How a store files a session's owner (for the per-principal bound): short, and no principal name."""
    return hashlib.sha256(owner_label(owner).encode()).hexdigest()[:12]


class Signer:
    """HMAC over records, dumps and handles."""

    def __init__(self, secret: bytes) -> None:
        self._secret = secret

    def mac(self, body: bytes, blob: bytes | None) -> str:
        mac = hmac.new(self._secret, body, hashlib.sha256)
        mac.update(b"\x00" + (blob or b""))
        return mac.hexdigest()

    def verify(self, mac: str, body: bytes, blob: bytes | None) -> bool:
        return hmac.compare_digest(mac, self.mac(body, blob))

    def new_handle(self, owner: str | None) -> str:
        """``s_`` + 24 url-safe characters: 12 random bytes and a 6-byte tag binding them to `owner`."""
        nonce = secrets.token_bytes(12)
        return "s_" + base64.urlsafe_b64encode(nonce + self._tag(nonce, owner)).decode()

    def issued(self, handle: str, owner: str | None) -> bool:
        """Whether this deployment issued `handle` to `owner` (a typo, a made-up id or another
        principal's id is not: replayed by someone else, it must not start a session under that id)."""
        if not handle.startswith("s_") or len(handle) != 26:
            return False
        try:
            raw = base64.urlsafe_b64decode(handle[2:].encode())
        except (ValueError, UnicodeEncodeError):
            return False
        return len(raw) == 18 and hmac.compare_digest(raw[12:], self._tag(raw[:12], owner))

    def _tag(self, nonce: bytes, owner: str | None) -> bytes:
        who = owner_label(owner).encode()
        return hmac.new(self._secret, b"handle\x00" + who + b"\x00" + nonce, hashlib.sha256).digest()[:6]


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
        try:
            record = SessionRecord.model_validate_json(body)
        except ValueError:
            return None
        return record if record.key == key.storage else None

    @abstractmethod
    async def load(self, key: SessionKey) -> StoredSession | None:
        """The verified session, or None (missing, expired, unreadable or failing its signature)."""

    @abstractmethod
    async def touch(self, key: SessionKey, ttl_seconds: float) -> int | None:
        """Refresh the TTL; return the current version (None when the key is not stored)."""

    @abstractmethod
    async def save(self, record: SessionRecord, blob: bytes | None, *, expected: int, limits: Limits) -> int:
        """Store if the current version is `expected` (0: not stored yet); return the new version.

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
