"""Encryption at rest of kept sessions: AES-256-GCM (the `cryptography` package).

A record holds the code, outputs and citations of its principal, and the interpreter dump
its variables: a reader of a shared store (or of its snapshots, backups, replicas) must
learn nothing from them. Each field is encrypted under a fresh 12-byte nonce, with its place
(session, version, field) as associated data, so a ciphertext moved elsewhere fails.

The key is `sessions.encryption_key`, else derived from `sessions.secret` with HKDF under a
label of its own (the same secret signs, but the two keys are independent). Every record
names its key by a short id: after a key change, records of a key listed in
`sessions.previous_encryption_keys` are still read (and written back under the new key on
their next save); any other key is refused with a message saying which setting to check.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

_NONCE_BYTES = 12
_KEY_LABEL = b"mcp-analysis kept-session encryption v1"


class CipherError(Exception):
    """A field cannot be decrypted: its message says why, for the person who runs the server."""


def derive_key(material: bytes) -> bytes:
    """A 256-bit AES key from a secret of any length (HKDF-SHA256 under this module's own label)."""
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_KEY_LABEL).derive(material)


def key_id(key: bytes) -> str:
    """A short public name of `key` (reveals nothing of it)."""
    return hmac.new(key, b"key-id", hashlib.sha256).hexdigest()[:8]


class RecordCipher:
    """Encrypts with the current key; decrypts with it or one of the previous ones."""

    def __init__(self, key: bytes, previous: Sequence[bytes] = ()) -> None:
        self.key_id = key_id(key)
        self._current = AESGCM(key)
        self._keys = {key_id(k): AESGCM(k) for k in previous}
        self._keys[self.key_id] = self._current

    def encrypt(self, plaintext: bytes, context: bytes) -> bytes:
        nonce = secrets.token_bytes(_NONCE_BYTES)
        return nonce + self._current.encrypt(nonce, plaintext, context)

    def decrypt(self, data: bytes, context: bytes, key_name: str) -> bytes:
        cipher = self._keys.get(key_name)
        if cipher is None:
            raise CipherError(
                f"it is encrypted with another key (key id {key_name}; this server's is {self.key_id}): set "
                "sessions.encryption_key (or sessions.secret) to the one it was written with, or list that "
                "key in sessions.previous_encryption_keys"
            )
        try:
            return cipher.decrypt(data[:_NONCE_BYTES], data[_NONCE_BYTES:], context)
        except (InvalidTag, ValueError):
            raise CipherError("its encrypted content fails authentication (altered in the store)") from None

    @staticmethod
    def overhead() -> int:
        """Bytes encryption adds to a field (nonce and tag)."""
        return _NONCE_BYTES + 16
