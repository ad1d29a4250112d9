"""A call that arrives while the server is still starting gets a clear error saying to retry.

The SDK turns any exception that is not an `AnalysisError` into a bare "Error executing
tool"; a slow start (a large knowledge base, a loaded machine) must say what is going on.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp.server.subscriptions import InMemorySubscriptionBus

from mcp_analysis.config import load_settings
from mcp_analysis.errors import AnalysisError
from mcp_analysis.server.runtime import Runtime

pytestmark = pytest.mark.anyio


async def test_a_call_during_a_slow_start_is_told_to_retry(tmp_path: Path) -> None:
    runtime = Runtime(load_settings(db=tmp_path / "kb.lancedb"), InMemorySubscriptionBus())
    runtime.startup_wait = 0.05  # never started: the wait runs out as a slow start's would
    with pytest.raises(AnalysisError, match=r"still starting .* retry in a moment"):
        await runtime.ready()


class _FailingOpener:
    """Opens nothing: the way a knowledge base that cannot be opened fails the start."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    async def open(self, settings: object) -> None:
        raise self.error


@pytest.mark.parametrize(
    ("error", "said"),
    [
        (AnalysisError("the knowledge base is damaged"), r"^the knowledge base is damaged$"),
        (RuntimeError("disk on fire"), r"^The server could not start: disk on fire$"),
    ],
)
async def test_every_call_after_a_failed_start_gets_the_failure(tmp_path: Path, error: Exception, said: str) -> None:
    runtime = Runtime(load_settings(db=tmp_path / "kb.lancedb"), InMemorySubscriptionBus())
    runtime.opener = _FailingOpener(error)
    async with runtime.use():
        for _ in range(3):  # the first waits for the start; the later ones find it over
            with pytest.raises(AnalysisError, match=said):
                await runtime.ready()
