"""`TextEmbedder`: text embeddings from the offline model or any pydantic-ai embedding model.

``onnx:all-MiniLM-L6-v2`` (the default) runs offline from files inside installed
packages, called directly (no pydantic-ai import on that path). Any other
``provider:model`` name pydantic-ai knows (``openai:...``, ``ollama:...``,
``sentence-transformers:...``, ``cohere:...``) goes through pydantic-ai's ``Embedder``;
its vector dimension is learned from the first embedding and checked against the
database.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mcp_analysis.embed.names import MINILM_DIMENSION
from mcp_analysis.embed.onnx_model import OnnxMiniLMEmbeddingModel
from mcp_analysis.errors import EmbedderError

if TYPE_CHECKING:
    from pydantic_ai.embeddings import EmbeddingModel

log = logging.getLogger(__name__)

_REMOTE_BATCH = 64


class TextEmbedder:
    """An embedder plus what we need to know about it: its name and vector dimension."""

    def __init__(self, name: str, model: OnnxMiniLMEmbeddingModel | EmbeddingModel, dimension: int | None) -> None:
        self.name = name
        self.model = model
        self.dimension = dimension
        self._embedder: Any = None  # pydantic-ai's Embedder over a remote model, made on first use

    @property
    def is_local(self) -> bool:
        return isinstance(self.model, OnnxMiniLMEmbeddingModel)

    def warm_up(self) -> None:
        """Pay model loading before the first request (local model only)."""
        if isinstance(self.model, OnnxMiniLMEmbeddingModel):
            self.model.warm_up()

    async def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return await self._embed(texts, "document")

    async def embed_query(self, text: str) -> np.ndarray:
        return (await self._embed([text], "query"))[0]

    async def _embed(self, texts: Sequence[str], kind: str) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension or 0), dtype=np.float32)
        try:
            if isinstance(self.model, OnnxMiniLMEmbeddingModel):
                vectors = await self.model.embed(list(texts))
            else:
                vectors = await self._remote(texts, kind)
        except EmbedderError:
            raise
        except Exception as exc:
            raise EmbedderError(
                f"Embedding with '{self.name}' failed: {exc}. Check the `embedder` setting, the provider's "
                "API key/base URL, and that the model is reachable."
            ) from exc
        if self.dimension is None:
            self.dimension = int(vectors.shape[1])
        elif vectors.shape[1] != self.dimension:
            raise EmbedderError(
                f"Embedder '{self.name}' returned {vectors.shape[1]}-dim vectors, expected {self.dimension}."
            )
        return vectors

    async def _remote(self, texts: Sequence[str], kind: str) -> np.ndarray:
        if self._embedder is None:
            from pydantic_ai.embeddings import Embedder

            self._embedder = Embedder(self.model)
        parts = []
        for start in range(0, len(texts), _REMOTE_BATCH):
            chunk = list(texts[start : start + _REMOTE_BATCH])
            if kind == "query":
                result = await self._embedder.embed_query(chunk)
            else:
                result = await self._embedder.embed_documents(chunk)
            parts.append(np.asarray(result.embeddings, dtype=np.float32))
        return np.concatenate(parts)


_LOCAL: dict[str, TextEmbedder] = {}


def create_embedder(name: str, cache_dir: Path | None = None, *, base_url: str | None = None) -> TextEmbedder:
    """Build the embedder named `provider:model` (see module docs).

    Local models are shared per process: they are pure functions and loading one costs
    about a second and ~100 MB. `base_url` points Ollama, vLLM or OpenAI-compatible
    providers at a server (else pydantic-ai reads it from the environment).
    """
    provider, _, model_name = name.partition(":")
    if not model_name:
        raise EmbedderError(f"Embedder name must look like 'provider:model', got {name!r}.")
    if provider == "onnx":
        key = f"{name}|{cache_dir}"
        if key not in _LOCAL:
            model = OnnxMiniLMEmbeddingModel(variant=model_name, cache_dir=cache_dir)
            _LOCAL[key] = TextEmbedder(name, model, MINILM_DIMENSION)
        return _LOCAL[key]
    try:
        from pydantic_ai.embeddings import infer_embedding_model

        from mcp_analysis.embed.providers import provider_factory

        remote = infer_embedding_model(name, provider_factory=provider_factory(base_url))
    except Exception as exc:
        raise EmbedderError(
            f"Cannot use embedder {name!r}: {exc}. Set `embedder` to 'onnx:all-MiniLM-L6-v2' (offline) or a "
            "pydantic-ai embedding model such as 'openai:text-embedding-3-small' or 'ollama:nomic-embed-text'."
        ) from exc
    return TextEmbedder(name, remote, None)
