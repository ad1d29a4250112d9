"""Session keys are typed values whose stored form stays what the stores already hold.

Records, dumps, "was kept" markers and Redis keys are filed under a key's text form, and
handles and owner digests under an owner's: a server must find, verify and bound what an
earlier run of the same deployment kept, so these forms are pinned here byte for byte.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from pathlib import Path

import pytest

from mcp_analysis.session.keys import KeyKind, SessionKey
from mcp_analysis.session.state import AnalysisState
from mcp_analysis.session.stores.base import Limits, SessionRecord, Signer, owner_digest
from mcp_analysis.session.stores.file import FileSessionStore

pytestmark = pytest.mark.anyio

SECRET = b"k" * 32
ROOMY = Limits(ttl_seconds=60, max_stored=10, max_per_principal=10, max_stored_bytes=2**20)


def test_each_kind_has_its_stored_text_form() -> None:
    assert SessionKey.local().storage == "local"
    assert SessionKey.http("abc123").storage == "http:abc123"
    assert SessionKey.principal("alice").storage == "principal:alice"
    assert SessionKey.handle("s_AAAA").storage == "handle:s_AAAA"
    assert str(SessionKey.principal("a:b")) == "principal:a:b"  # a name may hold the separator


def test_keys_compare_by_kind_and_value() -> None:
    assert SessionKey.principal("alice") == SessionKey(KeyKind.PRINCIPAL, "alice")
    assert SessionKey.principal("alice") != SessionKey.handle("alice")  # same value, other kind
    assert len({SessionKey.http("x"), SessionKey.http("x"), SessionKey.local()}) == 2


def test_only_principal_and_handle_keys_outlive_their_connection() -> None:
    outliving = {k.kind for k in (SessionKey.principal("p"), SessionKey.handle("h")) if k.outlives_connection}
    assert outliving == {KeyKind.PRINCIPAL, KeyKind.HANDLE}
    assert not SessionKey.local().outlives_connection and not SessionKey.http("x").outlives_connection


def test_a_principal_key_belongs_to_that_principal_only() -> None:
    key = SessionKey.principal("alice")
    assert key.belongs_to("alice")
    assert not key.belongs_to("bob") and not key.belongs_to(None)
    assert SessionKey.handle("s_x").belongs_to("bob") and SessionKey.local().belongs_to(None)  # checked elsewhere


def test_messages_name_a_session_without_the_storage_prefix() -> None:
    assert SessionKey.handle("s_abc").name == "s_abc"
    assert SessionKey.principal("alice").name == "alice"
    assert SessionKey.local().name == "local"


async def test_the_directory_store_files_a_session_under_its_key_text(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path, SECRET)
    key = SessionKey.handle("s_0123456789abcdefghijklmn")
    record = SessionRecord(key=key.storage, session_id=key.value, owner="alice", state=AnalysisState(), last_used=0)
    assert await store.save(record, b"dump", expected=0, limits=ROOMY) == 1
    digest = hashlib.sha256(b"handle:s_0123456789abcdefghijklmn").hexdigest()[:40]
    named = sorted(p.name for p in tmp_path.glob(f"{digest}.*"))
    assert named == [f"{digest}.chunks", f"{digest}.json", f"{digest}.kept"]
    header = json.loads((tmp_path / f"{digest}.json").read_bytes().split(b"\n", 1)[0])
    assert header["owner"] == hashlib.sha256(b"principal:alice").hexdigest()[:12] == owner_digest("alice")
    assert owner_digest(None) == hashlib.sha256(b"anonymous").hexdigest()[:12]
    loaded = await store.load(key)
    assert loaded is not None and loaded.blob == b"dump" and loaded.version == 1
    assert await store.load(SessionKey.principal("s_0123456789abcdefghijklmn")) is None  # other kind, other file


def test_handles_signed_for_an_owner_keep_their_format() -> None:
    nonce = bytes(range(12))
    for owner, who in (("alice", b"principal:alice"), (None, b"anonymous")):
        tag = hmac.new(SECRET, b"handle\x00" + who + b"\x00" + nonce, hashlib.sha256).digest()[:6]
        handle = "s_" + base64.urlsafe_b64encode(nonce + tag).decode()
        signer = Signer(SECRET)
        assert signer.issued(handle, owner)
        assert not signer.issued(handle, "bob")
    assert Signer(SECRET).issued(Signer(SECRET).new_handle("carol"), "carol")
