"""Fixtures shared by the adversarial tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.mcp_helpers import HttpServer, http_server

ENV = {
    "MCP_ANALYSIS_SANDBOX__WORKERS": "2",
    "MCP_ANALYSIS_SANDBOX__CODE_TIMEOUT": "6",
    "MCP_ANALYSIS_SANDBOX__CHECKOUT_TIMEOUT": "1",
}


@pytest.fixture(scope="package")
def two_worker_http(sample_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    """One `serve --http` for the folder: two workers, a short code timeout and a short checkout
    wait, so that "every worker busy" is reachable in seconds."""
    logs = tmp_path_factory.mktemp("two-workers")
    with http_server(sample_db, log_dir=logs, env={**ENV, "XDG_DATA_HOME": str(logs / "data")}) as server:
        yield server
