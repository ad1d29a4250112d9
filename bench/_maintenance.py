"""Index maintenance at scale: adding documents to a large knowledge base (bench/search.py).

On a copy of the benchmark's knowledge base (hard links; removed afterwards):

1. write `docs` new synthetic documents as an ingest does. They are searchable once the write
   commits: LanceDB scans the rows no index holds yet (flat) beside each indexed search.
2. fold the new rows into each index of the chunks table on its own (LanceDB's incremental
   ``optimize_indices``: new rows go into the existing index, nothing is retrained), then
   ``Store.optimize`` (what an ingest runs: compaction, then the same incremental index update).
3. with `rebuild`: each index built again from all rows: the vector index retrained
   (``optimize_indices(retrain=True)``; lancedb's own ``optimize(retrain=...)`` is a deprecated
   no-op in 0.40), the scalar and full-text ones created anew (retrain does nothing to them).

After each step: search p50 and the vector leg's recall@10 (``state``), the share of new chunks
the vector leg finds as their own nearest neighbour, and each index's unindexed rows.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import lance
import numpy as np
from _synthetic import documents, vocabulary, word_vectors, write

from mcp_analysis.store import schema
from mcp_analysis.store.database import Store
from mcp_analysis.store.lance import FTS, Bitmap, BTree

PROBES = 20  # new chunks searched for by their own vector
SCALAR = {"FTS": FTS(with_position=True), "Bitmap": Bitmap(), "BTree": BTree()}  # as Store.ensure_indexes builds them


async def _unindexed(table: Any) -> dict[str, int]:
    return {f"{ix.index_type}({','.join(ix.columns)})": ix.num_unindexed_rows for ix in await table.list_indices()}


async def _found_new(table: Any, probes: list[tuple[str, np.ndarray]], ef: int) -> float:
    """Share of `probes` (new chunks) the vector leg returns among the first 10 for their own vector."""
    hits = 0
    for chunk_id, vector in probes:
        rows = await table.query().nearest_to(vector).distance_type("cosine").ef(ef).select(["id"]).limit(10).to_list()
        hits += any(r["id"] == chunk_id for r in rows)
    return hits / max(len(probes), 1)


async def add_documents(
    kb_path: Path, docs: int, state: Callable[[Path], Awaitable[dict[str, float]]], rebuild: bool, ef: int
) -> dict[str, Any]:
    """Seconds to write `docs` documents and to fold them into the indexes, and the search between."""
    copy = kb_path.parent / f"{kb_path.stem}-maintenance"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(kb_path, copy, copy_function=os.link)  # LanceDB never rewrites a file: links are a copy
    try:
        store = await Store.open(copy)
        chunks = store.table(schema.CHUNKS)
        existing = await chunks.count_rows()
        words = vocabulary()
        vectors = await word_vectors(words)
        first = existing // 20
        new = list(documents(vectors, words, range(first, first + docs), 20, seed=2))
        started = time.perf_counter()
        await write(store, new)
        out: dict[str, Any] = {"docs": docs, "chunks_before": existing, "write_s": time.perf_counter() - started}
        out["chunks_after"] = await chunks.count_rows()
        rng = np.random.default_rng(5)
        rows = [c for d in new for c in d.chunks]
        probes = [(rows[i]["id"], np.asarray(rows[i]["vector"])) for i in rng.choice(len(rows), PROBES)]

        async def step(name: str) -> None:
            out[f"{name}: unindexed rows"] = await _unindexed(chunks)
            out[f"{name}: new chunks found"] = await _found_new(chunks, probes, ef)
            for key, value in (await state(copy)).items():
                out[f"{name}: {key}"] = value

        await step("after write")
        dataset = lance.dataset(str(copy / f"{schema.CHUNKS}.lance"))
        indexes = [ix for ix in await chunks.list_indices() if ix.num_unindexed_rows]
        for ix in indexes:
            started = time.perf_counter()
            dataset.optimize.optimize_indices(index_names=[ix.name])
            out[f"append {ix.index_type}({','.join(ix.columns)}) s"] = time.perf_counter() - started
        await chunks.checkout_latest()
        await step("after index append")
        started = time.perf_counter()
        await store.optimize()
        out["Store.optimize s"] = time.perf_counter() - started
        await step("after Store.optimize")
        if rebuild:
            dataset = lance.dataset(str(copy / f"{schema.CHUNKS}.lance"))
            for ix in await chunks.list_indices():
                started = time.perf_counter()
                if ix.index_type in SCALAR:
                    await chunks.create_index(ix.columns[0], config=SCALAR[ix.index_type], replace=True)
                else:
                    dataset.optimize.optimize_indices(index_names=[ix.name], retrain=True)
                out[f"rebuild {ix.index_type}({','.join(ix.columns)}) s"] = time.perf_counter() - started
            await chunks.checkout_latest()
            await step("after rebuild")
        store.close()
        return out
    finally:
        shutil.rmtree(copy, ignore_errors=True)
