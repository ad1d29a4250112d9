"""A kept session as a shared store holds it: signed over everything that matters, encrypted if asked.

Fields (bytes): ``v`` the version, ``f`` the format, ``k`` the encryption key's id ("" when
not encrypted), ``owner`` a keyed digest of the owner, ``rec`` the record (JSON, or its
ciphertext), ``c`` the names of the interpreter dump's chunks (chunks.py; absent without a
dump), and ``mac``: an HMAC over the format, the session's key, the version, the store's epoch
and all the rest. The chunks themselves are kept beside the record, each under its name and the
key id that encrypts it (`chunk_field`), encrypted with the session's key and its name as
associated data: a chunk is pure content (its name is a keyed digest of it, checked on reading),
so it needs no version to be safe from replay, and a chunk unchanged by a call is neither
encrypted nor sent again. Records of format 2 (the dump whole in ``blob``, sealed with the
version) are still read. So a record only loads under the key it was written for, at the version it was
written at, in the store's life it was written in: a stored version cannot be changed, and
an older signed record written back is caught by `SeenVersions` (a replica remembers the
newest version it has seen of each session). What cannot be loaded raises `RecordRefused`
with a reason a client can read.
"""

from __future__ import annotations

import re
from collections import OrderedDict

from pydantic import ValidationError

from mcp_analysis.session.stores import chunks
from mcp_analysis.session.stores.base import RecordRefused, SessionRecord, Signer, StoredSession
from mcp_analysis.session.stores.cipher import CipherError, RecordCipher

FORMAT = b"3"
_WHOLE = b"2"  # an earlier version's format: the dump whole in ``blob``
_LABEL = "kept-session"
_NOT_DECRYPTING = (
    "it is encrypted, and this server does not decrypt kept sessions (sessions.encrypt is false here): "
    "give every replica the same sessions.encrypt and key"
)
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
        self, storage: str, version: int, epoch: str, owner: str, body: bytes, listing: bytes | None
    ) -> dict[str, bytes]:
        """The record's fields; `listing` names the dump's chunks (None: no dump)."""
        key_name = b""
        if self.cipher is not None:
            key_name = self.cipher.key_id.encode()
            body = self.cipher.encrypt(body, _context(storage, version, b"rec"))
        fields = {"v": str(version).encode(), "f": FORMAT, "k": key_name, "owner": owner.encode(), "rec": body}
        signed = self._signed(FORMAT, storage, fields["v"], epoch, key_name, owner.encode(), body, listing)
        fields["mac"] = self.signer.seal(_LABEL, *signed).encode()
        if listing is not None:
            fields["c"] = listing
        return fields

    def chunk_field(self, name: str) -> str:
        """Where the chunk `name` sealed now is kept (its name and the key id: a key change writes it anew)."""
        return name + (self.cipher.key_id if self.cipher is not None else "")

    def seal_chunk(self, storage: str, name: str, piece: bytes | memoryview) -> bytes:
        return self.cipher.encrypt(bytes(piece), _chunk_context(storage, name)) if self.cipher else bytes(piece)

    def open(
        self, storage: str, fields: dict[bytes, bytes], epoch: str, seen: int | None, stored_chunks: dict[bytes, bytes]
    ) -> StoredSession:
        """The session in `fields` (its chunks in `stored_chunks`), verified; raises RecordRefused."""
        raw_version = fields.get(b"v")
        version = stored_version(raw_version)
        if raw_version is None or version < 0:
            what = "missing" if raw_version is None else "not a number"
            raise RecordRefused(f"its version field in the session store is {what}", version)
        form = fields.get(b"f")
        if form not in (FORMAT, _WHOLE):
            raise RecordRefused("it was written in a format this version of mcp-analysis does not read", version)
        key_name, owner, body = fields.get(b"k", b""), fields.get(b"owner", b""), fields.get(b"rec", b"")
        dump = fields.get(b"c" if form == FORMAT else b"blob")
        mac = fields.get(b"mac", b"").decode(errors="replace")
        if not self.signer.sealed(
            mac, _LABEL, *self._signed(form, storage, raw_version, epoch, key_name, owner, body, dump)
        ):
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
            body, whole = self._decrypt(
                storage, version, key_name.decode(errors="replace"), body, dump if form == _WHOLE else None
            )
        else:
            whole = dump if form == _WHOLE else None
        split = (
            self._chunks(storage, version, key_name.decode(errors="replace"), dump, stored_chunks)
            if form == FORMAT
            else None
        )
        try:
            record = SessionRecord.model_validate_json(body)
        except ValidationError:
            raise RecordRefused("its content is unreadable", version) from None
        if record.key != storage:
            raise RecordRefused("it belongs to another session", version)
        blob = split.blob if split is not None else whole
        return StoredSession(record, blob, version, split)

    def _chunks(
        self, storage: str, version: int, key_name: str, listing: bytes | None, stored: dict[bytes, bytes]
    ) -> chunks.Split | None:
        """The dump made of the chunks `listing` names, each decrypted and checked against its name."""
        if listing is None:
            return None
        names = chunks.parse_listing(listing)
        if names is None:
            raise RecordRefused("its list of interpreter state chunks is malformed", version)
        pieces: list[bytes] = []
        for name in names:
            piece = stored.get((name + key_name).encode())
            if piece is None:
                raise RecordRefused("a chunk of its interpreter state is missing from the session store", version)
            if key_name:
                piece = self._open_chunk(storage, version, key_name, name, piece)
            if self.signer.chunk_name(piece) != name:
                raise RecordRefused("a chunk of its interpreter state was changed in the session store", version)
            pieces.append(piece)
        return chunks.joined(pieces, names)

    def _open_chunk(self, storage: str, version: int, key_name: str, name: str, piece: bytes) -> bytes:
        if self.cipher is None:
            raise RecordRefused(_NOT_DECRYPTING, version)
        try:
            return self.cipher.decrypt(piece, _chunk_context(storage, name), key_name)
        except CipherError as exc:
            raise RecordRefused(str(exc), version) from None

    def _decrypt(
        self, storage: str, version: int, key_name: str, body: bytes, blob: bytes | None
    ) -> tuple[bytes, bytes | None]:
        cipher = self.cipher
        if cipher is None:
            raise RecordRefused(_NOT_DECRYPTING, version)
        try:
            body = cipher.decrypt(body, _context(storage, version, b"rec"), key_name)
            if blob is not None:
                blob = cipher.decrypt(blob, _context(storage, version, b"blob"), key_name)
        except CipherError as exc:
            raise RecordRefused(str(exc), version) from None
        return body, blob

    @staticmethod
    def _signed(
        form: bytes,
        storage: str,
        version: bytes,
        epoch: str,
        key_name: bytes,
        owner: bytes,
        body: bytes,
        dump: bytes | None,
    ) -> tuple[bytes, ...]:
        has_dump = b"1" if dump is not None else b"0"
        return (form, storage.encode(), version, epoch.encode(), key_name, owner, body, has_dump, dump or b"")


def _context(storage: str, version: int, field: bytes) -> bytes:
    return b"%s\x00%d\x00%s" % (storage.encode(), version, field)


def _chunk_context(storage: str, name: str) -> bytes:
    return b"%s\x00chunk\x00%s" % (storage.encode(), name.encode())
