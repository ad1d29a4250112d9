"""Text embeddings: the offline ONNX MiniLM and any pydantic-ai embedding model.

Contract: `names` is a leaf (embedder names and dimensions, no numpy); `embedder`
builds a `TextEmbedder` (`create_embedder`), which loads numpy, pydantic-ai and, for
the local model, onnxruntime. Importing this package itself loads nothing.
"""
