"""Index maintenance at scale: adding documents to a large knowledge base (bench/search.py).

On a copy of the benchmark's knowledge base (hard links; removed afterwards): write `docs` new synthetic
documents as an ingest does (searchable at once: LanceDB searches rows no index holds yet by
a flat scan), then `Store.optimize` (compaction, and LanceDB's incremental index update: new
rows go into the existing indexes without retraining them), and, when asked, a rebuild of the
vector index from scratch and LanceDB's ``optimize(retrain=True)`` (every index of the chunks
table retrained) for comparison. Search p50 is measured after each step.
"""

from __future__ import annotations

import os
import shutil
import statistics
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from _synthetic import documents, vocabulary, word_vectors, write

from mcp_analysis.store import schema
from mcp_analysis.store.database import Store


async def _unindexed(table: Any) -> dict[str, int]:
    return {ix.index_type: ix.num_unindexed_rows for ix in await table.list_indices() if ix.columns != ["id"]}


async def add_documents(
    kb_path: Path, docs: int, search: Callable[[Path], Awaitable[float]], rebuild: bool
) -> dict[str, Any]:
    """Seconds to write `docs` documents, to fold them into the indexes, and search p50 between."""
    copy = kb_path.parent / f"{kb_path.stem}-maintenance"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(kb_path, copy, copy_function=os.link)  # LanceDB never rewrites a file: links are a copy
    try:
        store = await Store.open(copy)
        chunks = store.table(schema.CHUNKS)
        existing = await chunks.count_rows()
        words = vocabulary()
        vectors = await word_vectors(words)
        started = time.perf_counter()
        first = existing // 20
        await write(store, documents(vectors, words, range(first, first + docs), 20, seed=2))
        out: dict[str, Any] = {"docs": docs, "chunks_before": existing, "write_s": time.perf_counter() - started}
        out["unindexed_after_write"] = await _unindexed(chunks)
        out["p50_before_optimize_ms"] = await search(copy)
        started = time.perf_counter()
        await store.optimize()
        out["optimize_s"] = time.perf_counter() - started
        out["unindexed_after_optimize"] = await _unindexed(chunks)
        out["p50_after_optimize_ms"] = await search(copy)
        if rebuild:
            from mcp_analysis.store.maintenance import vector_index  # this tree's (a --baseline side has none)

            started = time.perf_counter()
            await chunks.create_index("vector", config=vector_index(), replace=True)
            out["vector_rebuild_s"] = time.perf_counter() - started
            started = time.perf_counter()  # LanceDB's other option: retrain every index of the table
            await chunks.optimize(retrain=True)
            out["optimize_retrain_s"] = time.perf_counter() - started
            out["p50_after_retrain_ms"] = await search(copy)
        store.close()
        return out
    finally:
        shutil.rmtree(copy, ignore_errors=True)


def median_ms(values: list[float]) -> float:
    return statistics.median(values)
