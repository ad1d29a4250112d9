"""Where kept analysis sessions live: the interface, signing, and the choice of store.

Two implementations: a local directory (one server process; the default) and Redis
(`sessions.store = redis://...`, shared by replicas). Both keep, per session key, a
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
from typing import TYPE_CHECKING

from pydantic import BaseModel

from mcp_analysis.config import missing_secret_message
from mcp_analysis.errors import ConfigError
from mcp_analysis.session.state import AnalysisState

if TYPE_CHECKING:
    from mcp_analysis.config import Settings

log = logging.getLogger(__name__)

KEPT_MARKER_TTL_FACTOR = 24  # "was kept" markers outlive the session by this factor of the TTL


class SessionRecord(BaseModel):
    key: str
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


def owner_digest(owner: str | None) -> str:
    """How a store files a session's owner (for the per-principal bound): short, and no principal name."""
    return hashlib.sha256(("principal:" + owner if owner is not None else "anonymous").encode()).hexdigest()[:12]


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
        who = b"principal:" + owner.encode() if owner is not None else b"anonymous"
        return hmac.new(self._secret, b"handle\x00" + who + b"\x00" + nonce, hashlib.sha256).digest()[:6]


class SessionStore(ABC):
    """Kept sessions by key. Every method may raise StoreUnavailable."""

    #: Several processes use this store: check the version on every call, lock across processes.
    shared: bool = False
    #: Where it is, for messages (no password).
    description: str = ""

    def __init__(self, signer: Signer) -> None:
        self.signer = signer

    def _verified(self, key: str, mac: str, body: bytes, blob: bytes | None, where: str) -> SessionRecord | None:
        """The record in `body` if the signature over it and `blob` holds and it is `key`'s, else None."""
        if not self.signer.verify(mac, body, blob):
            log.warning("Ignoring %s: its signature does not match", where)
            return None
        try:
            record = SessionRecord.model_validate_json(body)
        except ValueError:
            return None
        return record if record.key == key else None

    @abstractmethod
    async def load(self, key: str) -> StoredSession | None:
        """The verified session, or None (missing, expired, unreadable or failing its signature)."""

    @abstractmethod
    async def touch(self, key: str, ttl_seconds: float) -> int | None:
        """Refresh the TTL; return the current version (None when the key is not stored)."""

    @abstractmethod
    async def save(self, record: SessionRecord, blob: bytes | None, *, expected: int, limits: Limits) -> int:
        """Store if the current version is `expected` (0: not stored yet); return the new version.

        Raises VersionConflict, or StoreFull: a new session over a count bound, or any save that
        would take the store past `limits.max_stored_bytes`.
        """

    @abstractmethod
    async def delete(self, key: str) -> None: ...

    @abstractmethod
    async def was_kept(self, key: str) -> bool:
        """Whether a session with this key was stored at some point (within the marker's lifetime)."""

    @abstractmethod
    async def count(self) -> int:
        """Sessions stored now."""

    async def expire(self, ttl_seconds: float) -> int:
        """Drop sessions idle past the TTL (stores without native expiry); returns how many went."""
        return 0

    async def ping(self) -> None:
        """Raise StoreUnavailable if the store cannot be reached."""
        return None

    async def acquire(self, key: str, *, wait: float) -> str:
        """Exclusive use of `key` across processes, waiting up to `wait` s (LockTimeout); returns a token.

        In-process stores need no cross-process lock (the manager serializes calls itself)."""
        return ""

    async def release(self, key: str, token: str) -> None:
        return None

    async def renew_locks(self) -> None:
        """Keep the locks this process holds (lease-based stores)."""
        return None

    async def close(self) -> None:
        return None


def session_secret(settings: Settings) -> bytes | None:
    secret = settings.sessions.secret
    return secret.get_secret_value().encode() if secret is not None else None


def open_session_store(settings: Settings, default_dir: object) -> SessionStore | None:
    """The configured store: Redis when `sessions.store` is set, else the local directory."""
    from pathlib import Path

    sessions = settings.sessions
    secret = session_secret(settings)
    if sessions.store:
        if secret is None:  # also refused by config validation; kept here for direct callers
            raise ConfigError(missing_secret_message(sessions.store))
        from mcp_analysis.session.redis_store import RedisSessionStore

        return RedisSessionStore(sessions.store, Signer(secret), namespace=store_namespace(settings))
    if not sessions.persist:
        return None
    from mcp_analysis.session.persist import FileSessionStore

    directory = Path(str(sessions.dir or default_dir))
    return FileSessionStore(directory, secret)


def store_namespace(settings: Settings) -> str:
    """Sessions belong to one deployment: its knowledge base and its signing key. Replicas of another
    deployment sharing the Redis never meet them, even over a knowledge base at the same path (each in
    its own container): keyed by the path alone, the other's records failed their signatures under
    ours (and blocked our principals' saves), and its sessions counted against our bounds."""
    secret = session_secret(settings) or b""
    return hmac.new(secret, str(settings.db).encode(), hashlib.sha256).hexdigest()[:16]
