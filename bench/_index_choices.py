"""Vector index choices measured: recall@10 of the vector leg as search runs it, and its p50 (bench/search.py).

Recall@10: the share of the exact 10 nearest chunks (a flat scan of every vector) among the
first 10 of the vector leg, fetched as `Store.candidates` fetches it (`candidates` rows, the
given ef / nprobes / refine factor). Index types other than the knowledge base's own are built
on a copy of its ids and vectors (``vectors-<variant>.lance`` next to it, cached), so their
build time is measured without touching the knowledge base.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lancedb
import numpy as np
from lancedb.index import HnswSq, IvfHnswSq, IvfPq

from mcp_analysis.store import schema


@dataclass
class Variant:
    """An index type with its build parameters, and the query parameters tried on it."""

    name: str
    config: Any  # None: the knowledge base's own index
    searches: list[dict[str, int]] = field(default_factory=list)  # ef / nprobes / refine_factor


def variants(rows: int, builds: bool) -> list[Variant]:
    """What LanceDB 0.40 offers, sized for `rows` vectors (IVF: about sqrt(rows) partitions); other
    index types than the knowledge base's own only with `builds` (each is a build of minutes)."""
    partitions = max(16, int(rows**0.5))
    # LanceDB wants ef >= limit x refine factor (it refines that many candidates).
    hnsw = [{"ef": ef, "refine_factor": r} for ef, r in ((256, 4), (512, 4), (768, 4), (1024, 4), (1024, 10))]
    own = Variant("own (IVF_HNSW_SQ, 1 partition, m 20)", None, hnsw)
    if not builds:
        return [own]
    return [
        own,
        Variant(
            "IVF_HNSW_SQ m 32, ef_construction 400",
            HnswSq(distance_type="cosine", num_partitions=1, m=32, ef_construction=400),
            hnsw,
        ),
        Variant(
            f"IVF_HNSW_SQ {max(2, rows // 250_000)} partitions",
            IvfHnswSq(distance_type="cosine", num_partitions=max(2, rows // 250_000)),
            [{"nprobes": n, "ef": 512, "refine_factor": r} for n in (1, 2) for r in (4, 10)],
        ),
        Variant(
            f"IVF_PQ {partitions} partitions, 48 sub-vectors",
            IvfPq(distance_type="cosine", num_partitions=partitions, num_sub_vectors=48),
            [{"nprobes": n, "refine_factor": r} for n in (20, 50, 100) for r in (10, 20)],
        ),
    ]


def _query(table: Any, unit: np.ndarray, limit: int, search: dict[str, int]) -> Any:
    query = table.query().nearest_to(unit).distance_type("cosine").select(["id"]).limit(limit)
    if "ef" in search:
        query = query.ef(search["ef"])
    if "nprobes" in search:
        query = query.nprobes(search["nprobes"])
    return query.refine_factor(search["refine_factor"])


async def exact_top10(table: Any, units: list[np.ndarray]) -> list[set[str]]:
    return [{r["id"] for r in await _query_exact(table, u)} for u in units]


async def _query_exact(table: Any, unit: np.ndarray) -> list[dict[str, Any]]:
    return (
        await table.query()
        .nearest_to(unit)
        .distance_type("cosine")
        .bypass_vector_index()
        .select(["id"])
        .limit(10)
        .to_list()
    )


async def measure_search(
    table: Any, units: list[np.ndarray], truth: list[set[str]], limit: int, search: dict[str, int]
) -> tuple[float, float]:
    """(recall@10, p50 ms) of the vector leg with these parameters."""
    for u in units[:3]:
        await _query(table, u, limit, search).to_list()
    found, spent = [], []
    for u, exact in zip(units, truth, strict=True):
        started = time.perf_counter()
        rows = await _query(table, u, limit, search).to_list()
        spent.append((time.perf_counter() - started) * 1000)
        found.append(len({r["id"] for r in rows[:10]} & exact) / 10)
    return statistics.mean(found), statistics.median(spent)


async def vectors_copy(kb_path: Path, name: str, config: Any) -> tuple[Any, float | None]:
    """A table of the knowledge base's ids and vectors with index `config` (cached); build seconds
    (None when cached)."""
    db = await lancedb.connect_async(str(kb_path.parent / f"{kb_path.stem}-vectors"))
    slug = "".join(c if c.isalnum() else "_" for c in name).strip("_")
    if slug in await db.table_names():
        table = await db.open_table(slug)
        if any(ix.columns == ["vector"] for ix in await table.list_indices()):
            return table, None
        await db.drop_table(slug)  # an interrupted build
    source = await (await lancedb.connect_async(str(kb_path))).open_table(schema.CHUNKS)
    data = await source.query().select(["id", "vector"]).to_arrow()
    table = await db.create_table(slug, data)
    started = time.perf_counter()
    await table.create_index("vector", config=config, replace=True)
    return table, time.perf_counter() - started


async def index_choices(
    kb_path: Path,
    kb_table: Any,
    units: list[np.ndarray],
    limit: int,
    builds: bool,
    truth: list[set[str]] | None = None,
) -> list[dict[str, Any]]:
    """Recall@10 and p50 of every variant and query setting, in one list of rows (`truth`: the exact
    top 10 of each of `units`, when already scanned)."""
    rows_count = await kb_table.count_rows()
    truth = truth if truth is not None else await exact_top10(kb_table, units)
    out = []
    for variant in variants(rows_count, builds):
        if variant.config is None:
            table, seconds = kb_table, None
        else:
            table, seconds = await vectors_copy(kb_path, variant.name, variant.config)
        for search in variant.searches:
            recall, p50 = await measure_search(table, units, truth, limit, search)
            out.append({"index": variant.name, "build_s": seconds, **search, "recall_at_10": recall, "p50_ms": p50})
    return out
