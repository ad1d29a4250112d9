"""Index maintenance at scale: adding documents to a large knowledge base (bench/search.py).

On a copy of the benchmark's knowledge base (hard links; removed afterwards):

1. write `docs` new synthetic documents as an ingest does. They are searchable once the write
   commits: LanceDB scans the rows no index holds yet (flat) beside each indexed search.
2. index the new rows of each index of the chunks table on its own, as a delta (LanceDB's
   ``optimize_indices(num_indices_to_merge=0)``: a new index segment over the new rows, searched
   beside the old one; nothing retrained or merged).
3. write as many documents again and run ``Store.optimize`` (what an ingest runs: compaction,
   then lancedb's default index update, which folds the new rows into the index); then `more`
   adds of a tenth as many documents, each followed by ``Store.optimize`` (index segments and
   search p50 after each: what many small adds leave). Past `max_segments` vector index segments
   (``search.vector_index_max_segments``; 0: never) the segments after the first are merged, as
   ``Store.optimize(max_segments)`` does, the merge timed apart from the optimize.
4. with `rebuild` (``scalar``, ``vector``): each such index built again from all rows: the vector
   index retrained (``optimize_indices(retrain=True)``; lancedb's own ``optimize(retrain=...)``
   is a deprecated no-op in 0.40), the scalar and full-text ones created anew.

After each step: search p50 and the vector leg's recall@10 (``state``), the share of new chunks
the vector leg finds among the first 10 for their own vector, and each index's unindexed rows
and segments. Each figure is printed (stderr) as it is measured: a long step stopped still leaves
the earlier ones.
"""

from __future__ import annotations

import os
import shutil
import sys
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


def _name(ix: Any) -> str:
    return f"{ix.index_type}({','.join(ix.columns)})"


async def _unindexed(table: Any) -> dict[str, str]:
    """Unindexed rows and segments of each index."""
    out = {}
    for ix in await table.list_indices():
        stats = await table.index_stats(ix.name)
        out[_name(ix)] = f"{ix.num_unindexed_rows} unindexed, {getattr(stats, 'num_indices', '?')} segments"
    return out


class _Figures(dict[str, Any]):
    """The add's figures, each printed as it is set."""

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, value)
        shown = round(value, 1) if isinstance(value, float) else value
        print(f"[maintenance] {key}: {shown}", file=sys.stderr, flush=True)


async def _found_new(table: Any, probes: list[tuple[str, np.ndarray]], ef: int) -> float:
    """Share of `probes` (new chunks) the vector leg returns among the first 10 for their own vector."""
    hits = 0
    for chunk_id, vector in probes:
        rows = await table.query().nearest_to(vector).distance_type("cosine").ef(ef).select(["id"]).limit(10).to_list()
        hits += any(r["id"] == chunk_id for r in rows)
    return hits / max(len(probes), 1)


async def add_documents(
    kb_path: Path,
    docs: int,
    state: Callable[[Path], Awaitable[dict[str, float]]],
    rebuild: list[str],
    ef: int,
    more: int = 0,
    max_segments: int = 0,
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
        out = _Figures(docs=docs, chunks_before=existing)
        started = time.perf_counter()
        await write(store, new)
        out["write s"] = time.perf_counter() - started
        out["chunks after"] = await chunks.count_rows()
        rng = np.random.default_rng(5)
        rows = [c for d in new for c in d.chunks]
        picked = rng.choice(len(rows), min(PROBES, len(rows)), replace=False)  # distinct chunks
        probes = [(rows[i]["id"], np.asarray(rows[i]["vector"])) for i in picked]

        async def step(name: str) -> None:
            out[f"{name}: indexes"] = await _unindexed(chunks)
            out[f"{name}: new chunks found"] = await _found_new(chunks, probes, ef)
            for key, value in (await state(copy)).items():
                out[f"{name}: {key}"] = value

        await step("after write")
        dataset = lance.dataset(str(copy / f"{schema.CHUNKS}.lance"))
        for ix in [ix for ix in await chunks.list_indices() if ix.num_unindexed_rows]:
            started = time.perf_counter()
            try:
                dataset.optimize.optimize_indices(index_names=[ix.name], num_indices_to_merge=0)
            except Exception as exc:  # a figure missing is reported, the other steps still run
                out[f"delta {_name(ix)} failed"] = repr(exc)
                continue
            out[f"delta {_name(ix)} s"] = time.perf_counter() - started
        await chunks.checkout_latest()
        await step("after delta indexes")
        started = time.perf_counter()  # a second add, left to what an ingest runs
        await write(store, documents(vectors, words, range(first + docs, first + 2 * docs), 20, seed=3))
        out["second write s"] = time.perf_counter() - started
        out["after second write: indexes"] = await _unindexed(chunks)
        started = time.perf_counter()
        await store.optimize(max_segments)
        out["Store.optimize s"] = time.perf_counter() - started
        await step("after Store.optimize")
        for k in range(1, more + 1):  # small adds, each followed by what an ingest runs
            begin = first + (1 + k) * docs
            await write(store, documents(vectors, words, range(begin, begin + max(docs // 10, 1)), 20, seed=3 + k))
            started = time.perf_counter()
            await store.optimize()  # then the merge Store.optimize(max_segments) runs, timed on its own
            out[f"add {k} of {more}: Store.optimize s"] = time.perf_counter() - started
            if max_segments and await store.vector_segments() > max_segments:
                started = time.perf_counter()
                await store.merge_vector_segments()
                out[f"add {k} of {more}: merge s"] = time.perf_counter() - started
            out[f"add {k} of {more}: indexes"] = await _unindexed(chunks)
            out[f"add {k} of {more}: p50 ms"] = (await state(copy))["p50 ms"]
        if rebuild:
            dataset = lance.dataset(str(copy / f"{schema.CHUNKS}.lance"))
            for ix in await chunks.list_indices():
                started = time.perf_counter()
                if ix.index_type in SCALAR and "scalar" in rebuild:
                    await chunks.create_index(ix.columns[0], config=SCALAR[ix.index_type], replace=True)
                elif ix.index_type not in SCALAR and "vector" in rebuild:
                    dataset.optimize.optimize_indices(index_names=[ix.name], retrain=True)
                else:
                    continue
                out[f"rebuild {_name(ix)} s"] = time.perf_counter() - started
            await chunks.checkout_latest()
            await step("after rebuild")
        store.close()
        return dict(out)
    finally:
        shutil.rmtree(copy, ignore_errors=True)
