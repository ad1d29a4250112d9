"""One pool of conversion workers for every add of a test module, as a folder watcher keeps one.

Each `Ingestor(kb).add` would otherwise start workers of its own (a second of CPU each, for their
parsers' imports). Modules that test what adds write, not the workers' lifetime
(tests/ingest/test_pool.py), take their ingestors from a `ModulePool`:

    _POOL = ModulePool()
    _shared_pool = _POOL.fixture()   # module-scoped, autouse
    ... await _POOL.ingestor(kb).add([...])
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.ingest.pipeline import Ingestor
from mcp_analysis.ingest.pool import ConversionPool
from tests.conftest import make_settings


class ModulePool:
    """The module's one pool while its fixture holds it (default ingest settings' limits)."""

    def __init__(self) -> None:
        self._pools: list[ConversionPool] = []

    def fixture(self) -> Callable[..., Iterator[None]]:
        @pytest.fixture(scope="module", autouse=True)
        def shared_pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
            settings = make_settings(tmp_path_factory.mktemp("pool") / "kb.lancedb")
            pool = ConversionPool(settings.ingest.limits(), settings.ingest.chunk_tokens)
            self._pools.append(pool)
            try:
                yield
            finally:
                self._pools.clear()
                pool.close()

        return shared_pool

    def ingestor(self, kb: KnowledgeBase, **options: Any) -> Ingestor:
        """An ingestor on the module's pool (`options`: Ingestor's others, such as progress)."""
        return Ingestor(kb, pool=self._pools[0], **options)
