"""What a Ray cluster's worker processes run for `add --ray` (ray_engine.py submits it).

Plain functions and a class: ray_engine wraps them with `ray.remote`, and Ray imports this module
on the workers by name, so the nodes need mcp-analysis installed (the same version: `probe`).

- `convert_file`: one file read, hashed and converted through the same bounded conversion worker
  child process a local add uses (pool.py / worker.py), on the node the task runs on: the same
  per-file bounds (size, time, memory, items, depth) hold there. A refused file is a result (its
  reason), not a task failure: Ray retries failures, and a hostile file fails the same way again.
- `Embedding`: an actor holding one embedder, loaded once, that embeds a slice of a batch's
  documents, builds their rows and writes them as Lance fragments, which the driver commits.
"""

from __future__ import annotations

import platform
import threading
import time
from dataclasses import dataclass
from typing import Any

from mcp_analysis.errors import IngestError
from mcp_analysis.ingest.files import FileSignature
from mcp_analysis.ingest.limits import Limits
from mcp_analysis.ingest.pool import ConversionPool
from mcp_analysis.ingest.prepare import PreparedFile
from mcp_analysis.ingest.rows import PreparedDocument, document_rows
from mcp_analysis.store.fragments import FragmentTarget, write_fragments

_pools: dict[tuple[Limits, int], ConversionPool] = {}  # per Ray worker process, reused by its next tasks
_pools_lock = threading.Lock()


@dataclass
class Converted:
    """One file as a worker node saw it. `prepared` is None when its bytes had one of the hashes the
    driver asked not to convert (an unchanged or moved document), or when it was refused."""

    node: str
    seconds: float
    digest: str = ""
    size: int = 0
    signature: FileSignature | None = None
    prepared: PreparedFile | None = None
    refused: str | None = None  # why the file cannot be used (IngestError's message)


def node_id() -> str:
    import ray

    return str(ray.get_runtime_context().get_node_id())


def _pool(limits: Limits, chunk_tokens: int) -> ConversionPool:
    with _pools_lock:
        key = (limits, chunk_tokens)
        if key not in _pools:
            _pools[key] = ConversionPool(limits, chunk_tokens)
        return _pools[key]


def convert_file(path: str, name: str, limits: Limits, chunk_tokens: int, skip: frozenset[str]) -> Converted:
    """Read `path` (hashing it) and convert it unless its sha256 is in `skip`."""
    started = time.monotonic()
    here = node_id()
    try:
        with _pool(limits, chunk_tokens).worker() as worker:
            read = worker.read(path, name)
            found = Converted(here, 0.0, read.digest, read.size, read.signature)
            if read.digest in skip:
                worker.drop()
            else:
                found.prepared = worker.convert()
    except IngestError as exc:
        return Converted(here, time.monotonic() - started, refused=str(exc))
    found.seconds = time.monotonic() - started
    return found


def probe(sources: tuple[str, ...] = ()) -> dict[str, Any]:
    """What the driver compares with its own: the versions that must match, where this runs, and
    why this node cannot look at each of the object-store `sources` it cannot (none: {})."""
    from mcp_analysis.ingest.sources import unreadable
    from mcp_analysis.version import __version__

    here = {"node": node_id(), "host": platform.node()}
    reasons = {source: unreadable(source) for source in sources}
    found = {source: reason for source, reason in reasons.items() if reason is not None}
    return here | {"python": platform.python_version(), "mcp-analysis": __version__, "unreadable": found}


class Embedding:
    """One embedder per actor, loaded once (the local model: ~100 MB, about a second)."""

    def __init__(self, name: str, base_url: str | None, dimension: int | None) -> None:
        from mcp_analysis.embed.embedder import create_embedder

        self.embedder = create_embedder(name, base_url=base_url)
        if self.embedder.dimension is None:
            self.embedder.dimension = dimension
        self.embedder.warm_up()

    async def write(
        self, documents: list[PreparedDocument], targets: dict[str, FragmentTarget]
    ) -> tuple[str, float, float, dict[str, list[Any]]]:
        """Embed `documents`' chunks, build their rows (the local add's code) and write them as Lance
        fragments, uncommitted (store/fragments.py): (this node's id, seconds embedding, seconds
        writing, the fragments by table) for the driver to commit."""
        started = time.monotonic()
        texts = [chunk.embedding_text for document in documents for chunk in document.chunks]
        vectors = await self.embedder.embed_documents(texts) if texts else []
        embedded = time.monotonic()
        batch, cursor = [], 0
        for document in documents:
            batch.append(document_rows(document, vectors[cursor : cursor + len(document.chunks)]))
            cursor += len(document.chunks)
        fragments = write_fragments(batch, targets)
        return node_id(), embedded - started, time.monotonic() - embedded, fragments
