"""all-MiniLM-L6-v2 on onnxruntime: the offline embedding model.

Fast because inference runs in a worker thread (onnxruntime releases the GIL) on all
cores, the default variant uses int8 matrix products (see model_files), and texts
are not padded: the int8 variant runs one text per call (its activation scales are
computed per call, so batching would make a text's vector depend on its neighbours;
one at a time is also the fastest on 2 cores), the exact variant batches short texts
of similar length up to `batch_tokens`.

It needs only onnxruntime, tokenizers and numpy: serving searches with it never imports
pydantic-ai (~300 modules, ~20 MB; embed/embedder.py uses pydantic-ai for remote models).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import anyio.to_thread
import numpy as np

from mcp_analysis.embed import model_files
from mcp_analysis.embed.names import LOCAL_VARIANTS as VARIANTS
from mcp_analysis.embed.names import MINILM_DIMENSION as DIMENSION
from mcp_analysis.errors import EmbedderError
from mcp_analysis.process_gc import trim_heap

MAX_TOKENS = 256  # sentence-transformers' max_seq_length for this model


def load_tokenizer(max_tokens: int = MAX_TOKENS) -> Any:
    """The bundled WordPiece tokenizer, truncating like the model does, no padding."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(model_files.tokenizer_path()))
    tok.enable_truncation(max_tokens)
    tok.no_padding()
    return tok


@dataclass(eq=False)
class OnnxMiniLMEmbeddingModel:
    """Local, offline sentence embeddings (384 dims, cosine)."""

    variant: str = "all-MiniLM-L6-v2"
    threads: int = 0
    batch_tokens: int = 256
    cache_dir: Path | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise EmbedderError(
                f"Unknown local embedding model 'onnx:{self.variant}'. Available: "
                + ", ".join(f"onnx:{name}" for name in VARIANTS)
            )

    @property
    def _batchable(self) -> bool:
        return VARIANTS[self.variant] == "exact"

    @property
    def model_name(self) -> str:
        return self.variant

    @property
    def system(self) -> str:
        return "onnx"

    @cached_property
    def tokenizer(self) -> Any:
        return load_tokenizer()

    @cached_property
    def session(self) -> Any:
        import onnxruntime as ort

        if VARIANTS[self.variant] == "int8":
            path = model_files.derived_model_path(self.cache_dir)
        else:
            path = model_files.source_model_path()
        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads or os.cpu_count() or 1
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        # Texts are not padded, so nearly every call has a new input shape: a memory pattern
        # (planned per shape, kept for reuse) would only hold ~20 MB more and never be reused.
        options.enable_mem_pattern = False
        # Idle pool threads sleep instead of spinning: the cores are shared with the event
        # loop, the interpreter workers and other processes.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        try:
            session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        except Exception as exc:
            raise EmbedderError(f"Could not load the embedding model {path}: {exc}") from exc
        # Loading the exact variant folds its int8 weights into fp32 ones: what the load freed is
        # handed back, not kept idle in the heap (process_gc.py).
        trim_heap()
        self._input_names = {i.name for i in session.get_inputs()}
        return session

    def warm_up(self) -> None:
        """Load the model and run it once (pays the one-time costs before the first query)."""
        self.embed_sync(["warm up"])

    def embed_sync(self, texts: Sequence[str]) -> np.ndarray:
        """Normalized embeddings, one row per text, in input order."""
        if not texts:
            return np.zeros((0, DIMENSION), dtype=np.float32)
        session = self.session
        encodings = self.tokenizer.encode_batch(list(texts))
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        out = np.zeros((len(texts), DIMENSION), dtype=np.float32)
        start = 0
        while start < len(order):
            # Grow the batch while its padded size stays within the token budget.
            end = start + 1
            while (
                self._batchable
                and end < len(order)
                and len(encodings[order[end]].ids) * (end - start + 1) <= self.batch_tokens
            ):
                end += 1
            batch = [encodings[i] for i in order[start:end]]
            out[order[start:end]] = self._run(session, batch)
            start = end
        return out

    def _run(self, session: Any, batch: list[Any]) -> np.ndarray:
        width = max(len(e.ids) for e in batch)
        ids = np.zeros((len(batch), width), dtype=np.int64)
        mask = np.zeros((len(batch), width), dtype=np.int64)
        for row, enc in enumerate(batch):
            ids[row, : len(enc.ids)] = enc.ids
            mask[row, : len(enc.ids)] = 1
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = session.run(None, {k: v for k, v in feed.items() if k in self._input_names})[0]
        summed = (hidden * mask[:, :, None]).sum(axis=1)
        pooled = summed / np.maximum(mask.sum(axis=1, keepdims=True), 1)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """`embed_sync` in a worker thread, one inference at a time (each already uses every core)."""

        def run() -> np.ndarray:
            with self._lock:
                return self.embed_sync(texts)

        return await anyio.to_thread.run_sync(run)

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer.encode(text).ids)
