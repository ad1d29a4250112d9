"""A kept session as a shared store holds it: signed over everything that matters, encrypted if asked.

Fields (bytes): ``v`` the version, ``f`` the format, ``k`` the encryption key's id ("" when
not encrypted), ``owner`` a keyed digest of the owner, ``rec`` the record (JSON, or its
ciphertext), ``blob`` the interpreter dump (or its ciphertext; absent without one), and
``mac``: an HMAC over the format, the session's key, the version, the store's epoch and all
the rest. So a record only loads under the key it was written for, at the version it was
written at, in the store's life it was written in: a stored version cannot be changed, and
an older signed record written back is caught by `SeenVersions` (a replica remembers the
newest version it has seen of each session). What cannot be loaded raises `RecordRefused`
with a reason a client can read.
"""

from __future__ import annotations

import re
from collections import OrderedDict

from pydantic import ValidationError

from mcp_analysis.session.stores.base import RecordRefused, SessionRecord, Signer, StoredSession
from mcp_analysis.session.stores.cipher import CipherError, RecordCipher

FORMAT = b"2"
_LABEL = "kept-session"
_DIGITS = re.compile(rb"\d{1,15}")


def stored_version(raw: bytes | None) -> int:
    """A stored version field as the store's scripts read it: the number, or -1 (missing or not one)."""
    return int(raw) if raw is not None and _DIGITS.fullmatch(raw) else -1


class SeenVersions:
    """The newest version this replica has seen of each session (the most recent `limit` sessions)."""

    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self._seen: OrderedDict[str, int] = OrderedDict()

    def get(self, member: str) -> int | None:
        return self._seen.get(member)

    def saw(self, member: str, version: int) -> None:
        newest = max(version, self._seen.pop(member, version))
        self._seen[member] = newest
        while len(self._seen) > self.limit:
            self._seen.popitem(last=False)

    def clear(self) -> None:
        self._seen.clear()


class Sealer:
    """Turns a record and dump into signed (and maybe encrypted) fields, and back."""

    def __init__(self, signer: Signer, cipher: RecordCipher | None) -> None:
        self.signer = signer
        self.cipher = cipher

    def seal(
        self, storage: str, version: int, epoch: str, owner: str, body: bytes, blob: bytes | None
    ) -> dict[str, bytes]:
        key_name = b""
        if self.cipher is not None:
            key_name = self.cipher.key_id.encode()
            body = self.cipher.encrypt(body, _context(storage, version, b"rec"))
            if blob is not None:
                blob = self.cipher.encrypt(blob, _context(storage, version, b"blob"))
        fields = {"v": str(version).encode(), "f": FORMAT, "k": key_name, "owner": owner.encode(), "rec": body}
        fields["mac"] = self._mac(storage, fields["v"], epoch, key_name, fields["owner"], body, blob).encode()
        if blob is not None:
            fields["blob"] = blob
        return fields

    def open(self, storage: str, fields: dict[bytes, bytes], epoch: str, seen: int | None) -> StoredSession:
        """The session in `fields`, verified; raises RecordRefused."""
        raw_version = fields.get(b"v")
        version = stored_version(raw_version)
        if raw_version is None or version < 0:
            what = "missing" if raw_version is None else "not a number"
            raise RecordRefused(f"its version field in the session store is {what}", version)
        if fields.get(b"f") != FORMAT:
            raise RecordRefused("it was written in a format this version of mcp-analysis does not read", version)
        key_name, owner, body = fields.get(b"k", b""), fields.get(b"owner", b""), fields.get(b"rec", b"")
        blob = fields.get(b"blob")
        mac = fields.get(b"mac", b"").decode(errors="replace")
        if not self.signer.sealed(mac, _LABEL, *self._signed(storage, raw_version, epoch, key_name, owner, body, blob)):
            raise RecordRefused(
                "it fails its signature (changed in the store, or written under another sessions.secret)", version
            )
        if seen is not None and version < seen:
            raise RecordRefused(
                f"it is older (version {version}) than one this server has already seen (version {seen}): an "
                "earlier state was written back over a later one",
                version,
            )
        if key_name:  # (a record kept before encryption was turned on is read as it is, and encrypted when saved)
            body, blob = self._decrypt(storage, version, key_name.decode(errors="replace"), body, blob)
        try:
            record = SessionRecord.model_validate_json(body)
        except ValidationError:
            raise RecordRefused("its content is unreadable", version) from None
        if record.key != storage:
            raise RecordRefused("it belongs to another session", version)
        return StoredSession(record, blob, version)

    def _decrypt(
        self, storage: str, version: int, key_name: str, body: bytes, blob: bytes | None
    ) -> tuple[bytes, bytes | None]:
        cipher = self.cipher
        if cipher is None:
            raise RecordRefused(
                "it is encrypted, and this server does not decrypt kept sessions (sessions.encrypt is false here): "
                "give every replica the same sessions.encrypt and key",
                version,
            )
        try:
            body = cipher.decrypt(body, _context(storage, version, b"rec"), key_name)
            if blob is not None:
                blob = cipher.decrypt(blob, _context(storage, version, b"blob"), key_name)
        except CipherError as exc:
            raise RecordRefused(str(exc), version) from None
        return body, blob

    def _mac(
        self, storage: str, version: bytes, epoch: str, key_name: bytes, owner: bytes, body: bytes, blob: bytes | None
    ) -> str:
        return self.signer.seal(_LABEL, *self._signed(storage, version, epoch, key_name, owner, body, blob))

    @staticmethod
    def _signed(
        storage: str, version: bytes, epoch: str, key_name: bytes, owner: bytes, body: bytes, blob: bytes | None
    ) -> tuple[bytes, ...]:
        has_blob = b"1" if blob is not None else b"0"
        return (FORMAT, storage.encode(), version, epoch.encode(), key_name, owner, body, has_blob, blob or b"")


def _context(storage: str, version: int, field: bytes) -> bytes:
    return b"%s\x00%d\x00%s" % (storage.encode(), version, field)
