"""Kept sessions in Redis are sealed: encrypted under a named key, signed over their place.

The real store (session/stores/redis.py) on a real redis-server, several store objects standing
for replicas configured differently: a key change keeps sessions readable only through
`sessions.previous_encryption_keys`, a replica that does not decrypt names the setting to
check, and a record copied under another session's key never loads there. A session's lock
lasts `sessions.lock_lease_seconds` there.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis as redis_client

from mcp_analysis.config import load_settings
from mcp_analysis.errors import ConfigError
from mcp_analysis.session.keys import SessionKey
from mcp_analysis.session.state import AnalysisState
from mcp_analysis.session.stores.base import Limits, RecordRefused, SessionRecord, Signer
from mcp_analysis.session.stores.cipher import RecordCipher, derive_key
from mcp_analysis.session.stores.factory import open_session_store
from mcp_analysis.session.stores.redis import RedisSessionStore
from tests.services import redis

pytestmark = pytest.mark.anyio

SECRET = b"sealing-test-secret-0123456789abcdef"
LIMITS = Limits(ttl_seconds=600, max_stored=100, max_per_principal=100, max_stored_bytes=10**8)
OLD, NEW, OTHER = (derive_key(k) for k in (b"old-key-0123456789", b"new-key-0123456789", b"other-key-012345678"))


@pytest.fixture(scope="module")
def port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    with redis(tmp_path_factory.mktemp("sealing")) as running:
        yield running


def store(port: int, cipher: RecordCipher | None, namespace: str) -> RedisSessionStore:
    return RedisSessionStore(f"redis://127.0.0.1:{port}/0", Signer(SECRET), namespace=namespace, cipher=cipher)


def record(key: SessionKey, marker: str) -> SessionRecord:
    state = AnalysisState(citations=[marker])
    return SessionRecord(key=key.storage, session_id=key.value, owner="alice", state=state, last_used=0.0)


async def test_a_changed_key_reads_old_sessions_only_through_previous_keys(port: int) -> None:
    key = SessionKey.principal("alice")
    before = store(port, RecordCipher(OLD), "rotate")
    version = await before.save(record(key, "kept-under-old"), b"dump-old", expected=0, limits=LIMITS)
    without_old = store(port, RecordCipher(NEW), "rotate")
    with pytest.raises(RecordRefused, match=r"encrypted with another key \(key id \w+; this server's is \w+\)"):
        await without_old.load(key)
    rotated = store(port, RecordCipher(NEW, [OLD]), "rotate")
    loaded = await rotated.load(key)
    assert loaded is not None and loaded.record.state.citations == ["kept-under-old"] and loaded.blob == b"dump-old"
    await rotated.save(loaded.record, b"dump-new", expected=version, limits=LIMITS)  # written under the new key
    again = await store(port, RecordCipher(NEW), "rotate").load(key)
    assert again is not None and again.blob == b"dump-new"
    for each in (before, without_old, rotated):
        await each.close()


async def test_a_replica_that_does_not_decrypt_names_the_setting(port: int) -> None:
    key = SessionKey.principal("alice")
    sealed = store(port, RecordCipher(OTHER), "plain")
    await sealed.save(record(key, "secret-citation"), b"dump", expected=0, limits=LIMITS)
    with pytest.raises(RecordRefused, match=r"sessions\.encrypt is false here"):
        await store(port, None, "plain").load(key)
    await sealed.close()


async def test_a_record_copied_under_another_sessions_key_never_loads(port: int) -> None:
    admin = redis_client.Redis(port=port)
    one = store(port, RecordCipher(NEW), "moved")
    victim, attacker = SessionKey.principal("victim"), SessionKey.principal("attacker")
    await one.save(record(victim, "victim-data"), b"victim-dump", expected=0, limits=LIMITS)
    await one.save(record(attacker, "mine"), b"attacker-dump", expected=0, limits=LIMITS)
    admin.restore(one.redis_key(attacker), 0, admin.dump(one.redis_key(victim)), replace=True)
    with pytest.raises(RecordRefused, match="fails its signature"):
        await one.load(attacker)
    admin.close()
    await one.close()


async def test_the_dump_and_record_are_not_in_redis_in_clear(port: int) -> None:
    sealed = store(port, RecordCipher(NEW), "clear")
    key = SessionKey.principal("alice")
    await sealed.save(record(key, "CITATION-IN-CLEAR"), b"DUMP-IN-CLEAR", expected=0, limits=LIMITS)
    admin = redis_client.Redis(port=port)
    held = b"".join(admin.hgetall(sealed.redis_key(key)).values()) + sealed.redis_key(key).encode()
    admin.close()
    await sealed.close()
    assert b"CITATION-IN-CLEAR" not in held and b"DUMP-IN-CLEAR" not in held and b"alice" not in held


async def test_a_sessions_lock_lasts_the_configured_lease(port: int) -> None:
    """`sessions.lock_lease_seconds` is the lock's life in Redis without renewal (10 s unless set), and a
    lease shorter than the upkeep loop can renew is refused with the setting's name."""
    with pytest.raises(ConfigError, match="lock_lease_seconds"):
        load_settings(sessions={"lock_lease_seconds": 1})
    ttls = {}
    for lease in (None, 4.0):
        configured = {"store": f"redis://127.0.0.1:{port}/0", "secret": SECRET.decode()}
        settings = load_settings(sessions=configured | ({"lock_lease_seconds": lease} if lease else {}))
        opened = open_session_store(settings)
        assert isinstance(opened, RedisSessionStore)
        admin = redis_client.Redis(port=port)
        key = SessionKey.principal(f"lease-{lease}")
        await opened.acquire(key, wait=1)
        [lock] = [k for k in admin.keys("*lock:*") if admin.pttl(k) > 0]
        ttls[lease] = admin.pttl(lock)
        admin.delete(lock)
        admin.close()
        await opened.close()
    assert 9_000 < ttls[None] <= 10_000 and 3_000 < ttls[4.0] <= 4_000, ttls
