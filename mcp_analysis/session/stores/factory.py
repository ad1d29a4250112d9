"""The session store a deployment is configured with, and the namespace its sessions live in."""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path
from typing import TYPE_CHECKING

from mcp_analysis.config import Settings
from mcp_analysis.errors import ConfigError
from mcp_analysis.paths import data_home
from mcp_analysis.session.settings import missing_secret_message
from mcp_analysis.session.stores.base import SessionStore, Signer
from mcp_analysis.session.stores.file import FileSessionStore

if TYPE_CHECKING:
    from mcp_analysis.session.stores.cipher import RecordCipher


def open_session_store(settings: Settings) -> SessionStore | None:
    """Redis when `sessions.store` is set, else the local directory (None when `sessions.persist` is off).

    Raises OSError when the directory cannot be made or used."""
    sessions = settings.sessions
    secret = session_secret(settings)
    if sessions.store:
        if secret is None:  # also refused by config validation; kept here for direct callers
            raise ConfigError(missing_secret_message(sessions.store))
        # Imported only when configured: most servers never load the Redis client.
        from mcp_analysis.session.stores.redis import RedisSessionStore

        return RedisSessionStore(
            sessions.store,
            Signer(secret),
            namespace=store_namespace(settings),
            cipher=record_cipher(settings),
            remember=sessions.max_stored,
            lease_seconds=sessions.lock_lease_seconds,
        )
    if not sessions.persist:
        return None
    return FileSessionStore(Path(sessions.dir or default_sessions_dir(settings)), secret)


def record_cipher(settings: Settings) -> RecordCipher | None:
    """How a shared store encrypts kept sessions: `sessions.encryption_key`, else a key derived from
    `sessions.secret` (HKDF, a label of its own); None when `sessions.encrypt` is off."""
    sessions = settings.sessions
    key = sessions.encryption_key
    material = key.get_secret_value().encode() if key is not None else session_secret(settings)
    if not sessions.encrypt or material is None:
        return None
    from mcp_analysis.session.stores.cipher import RecordCipher, derive_key  # loads `cryptography`

    previous = [derive_key(old.get_secret_value().encode()) for old in sessions.previous_encryption_keys]
    return RecordCipher(derive_key(material), previous)


def default_sessions_dir(settings: Settings) -> Path:
    return data_home() / "sessions" / store_namespace(settings)


def session_secret(settings: Settings) -> bytes | None:
    secret = settings.sessions.secret
    return secret.get_secret_value().encode() if secret is not None else None


def store_namespace(settings: Settings) -> str:
    """Sessions belong to one deployment: its knowledge base and its signing key. Replicas of another
    deployment sharing the Redis never meet them, even over a knowledge base at the same path (each in
    its own container): keyed by the path alone, the other's records would fail their signatures under
    ours (blocking our principals' saves), and its sessions would count against our bounds."""
    secret = session_secret(settings) or b""
    return hmac.new(secret, str(settings.db).encode(), hashlib.sha256).hexdigest()[:16]
