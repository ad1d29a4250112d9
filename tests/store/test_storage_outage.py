"""A knowledge base on an object store that becomes unreachable between two searches (real moto S3
behind a gate that is cut): the second search is the clear, retryable `StorageUnavailableError`,
whichever way the legs ran (LanceDB's queries or Lance's scanner), even while the table's version is
still the one read a moment before (read consistency), so only the legs themselves meet the outage,
both at once."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import numpy as np
import pytest

from mcp_analysis.errors import StorageUnavailableError
from mcp_analysis.store.candidates import ViewLegs
from mcp_analysis.store.database import Store
from tests.services import S3, TcpGate, moto_s3
from tests.store.test_vector_leg import DIMENSION, indexed_store

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3]:
    with moto_s3(tmp_path_factory.mktemp("moto")) as started:
        yield started


@pytest.fixture
async def gated_kb(s3: S3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[str, TcpGate]]:
    """A small HNSW-indexed knowledge base of this test's own on the store, reached through a gate."""
    store, _ = await indexed_store(tmp_path / "kb.lancedb", seed=3)
    store.close()
    gate = TcpGate(s3.port)
    try:
        for key, value in s3.env(f"http://127.0.0.1:{gate.port}").items():
            monkeypatch.setenv(key, value)
        yield s3.upload_dir(tmp_path / "kb.lancedb", tmp_path.name), gate
    finally:
        gate.close()


@pytest.mark.parametrize("scanner_min_rows", [0, 10**9], ids=["lance-scanner", "lancedb"])
async def test_a_search_meeting_an_outage_in_both_legs_is_the_retryable_error(
    gated_kb: tuple[str, TcpGate], scanner_min_rows: int
) -> None:
    uri, gate = gated_kb
    # Retries off: the outage shows at once, not after the object store client's backoff (seconds).
    store = await Store.open(uri, storage_options={"client_max_retries": "0", "client_retry_timeout": "2"})
    legs = ViewLegs(scanner_min_rows=scanner_min_rows)
    try:
        query = np.full(DIMENSION, 0.1, dtype=np.float32)
        with store.storage_errors():
            assert await store.candidates("harbour", query, 5, None, ef=64, refine_factor=4, view_legs=legs)
        gate.cut()
        with pytest.raises(StorageUnavailableError) as raised, store.storage_errors():
            await store.candidates("crane tide", query, 5, None, ef=64, refine_factor=4, view_legs=legs)
    finally:
        store.close()
    assert uri in str(raised.value)
