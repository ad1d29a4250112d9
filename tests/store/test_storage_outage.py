"""A knowledge base on an object store that becomes unreachable between two searches (real moto S3
behind a gate that is cut): the second search is the clear, retryable `StorageUnavailableError`,
whichever way the legs ran (LanceDB's queries or Lance's scanner), even while the table's version is
still the one read a moment before (read consistency), so only the legs themselves meet the outage,
both at once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from mcp_analysis.errors import StorageUnavailableError
from mcp_analysis.store.candidates import ViewLegs
from mcp_analysis.store.database import Store
from tests.services import TcpGate, moto_s3
from tests.store.test_vector_leg import DIMENSION, indexed_store

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(300)]


@pytest.fixture
async def local_kb(tmp_path: Path) -> Path:
    store, _ = await indexed_store(tmp_path / "kb.lancedb", seed=3)
    store.close()
    return tmp_path / "kb.lancedb"


@pytest.fixture
def gated_kb(local_kb: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, TcpGate]]:
    with moto_s3(tmp_path) as s3:
        gate = TcpGate(s3.port)
        try:
            for key, value in s3.env(f"http://127.0.0.1:{gate.port}").items():
                monkeypatch.setenv(key, value)
            yield s3.upload_dir(local_kb, "kb"), gate
        finally:
            gate.close()


@pytest.mark.parametrize("scanner_min_rows", [0, 10**9], ids=["lance-scanner", "lancedb"])
async def test_a_search_meeting_an_outage_in_both_legs_is_the_retryable_error(
    gated_kb: tuple[str, TcpGate], scanner_min_rows: int
) -> None:
    uri, gate = gated_kb
    store = await Store.open(uri)
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
