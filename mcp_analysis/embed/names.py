"""Embedder names and vector dimensions, known without loading any model.

A leaf: the settings, haiku.rag's config and database records, and the store's
embedder check need these facts at start-up, before (or without) numpy,
onnxruntime and pydantic-ai are imported.
"""

from __future__ import annotations

DEFAULT_EMBEDDER = "onnx:all-MiniLM-L6-v2"
MINILM_DIMENSION = 384
"""Vector dimension of every local (``onnx:``) model: they are all all-MiniLM-L6-v2."""
LOCAL_VARIANTS = {"all-MiniLM-L6-v2": "int8", "all-MiniLM-L6-v2-exact": "exact"}
"""Local model names (after ``onnx:``) -> how they run: int8 activations, or exact fp32."""
MINILM_EXACT = "onnx:all-MiniLM-L6-v2-exact"


def known_dimension(embedder: str) -> int | None:
    """The vector dimension of `embedder` when known without running it (local models); else None."""
    return MINILM_DIMENSION if embedder.startswith("onnx:") else None
