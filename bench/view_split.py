"""Where a filtered view's legs spend their time, part by part (bench/search.py times the whole).

For the view `bench/search.py` times as "a tenth passes" (``metadata LIKE '%"group": 3%'``), on a
cached synthetic knowledge base, each leg as the store sends it under the view's prefilter (the
`VisibleDocuments` expression, at the ef `KnowledgeBase.search_settings` gives the view) and
unfiltered, query by query: its time in all; LanceDB planning it alone (``explain_plan``); and from
``analyze_plan`` (the query run with DataFusion's metrics) its execution, the prefilter's mask (the
``ScalarIndexQuery`` node: the view's ids looked up in the ``document_id`` index), the HNSW walk
(``index_search_time`` of ``ANNSubIndex``) or the full-text search (``MatchQuery``, which holds the
mask). Medians in ms, the first query warming caches.

    python bench/view_split.py [--dir bench/results/rebuild] [--size 1000000] [--queries 12]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import anyio
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import describe, machine
from _synthetic import settings_for, vocabulary
from search import FILTER

from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.store import schema
from mcp_analysis.store.candidates import CHUNK_COLUMNS

_UNITS = {"s": 1000.0, "ms": 1.0, "µs": 1e-3, "ns": 1e-6}


def metric(plan: str, node: str, key: str) -> float:
    """A time metric (ms) of the first `node` of an analyzed plan (nan when it has none)."""
    line = next((line for line in plan.splitlines() if line.strip().startswith(f"{node}:")), "")
    found = re.search(rf"\b{key}=([0-9.]+)(ms|µs|ns|s)\b", line)
    return float(found.group(1)) * _UNITS[found.group(2)] if found else float("nan")


def executed(plan: str) -> float:
    found = re.search(r"AnalyzeExec verbose=true, elapsed=([0-9.]+)(ms|µs|ns|s)", plan)
    return float(found.group(1)) * _UNITS[found.group(2)] if found else float("nan")


async def split(path: Path, queries: int) -> dict[str, Any]:
    kb = await KnowledgeBase.open(settings_for(path))
    table = kb.store.table(schema.CHUNKS)
    view = await kb.open_corpus(FILTER)
    prefilter = await kb.prefilter(view.filter)
    assert prefilter is not None
    settings = kb.search_settings(view.filter)
    ef, unfiltered_ef, refine, rows = settings.ann_ef, kb.settings.search.ann_ef, settings.ann_refine_factor, 50
    words, rng = vocabulary(), np.random.default_rng(5)
    texts = [" ".join(words[i] for i in rng.choice(400, size=rng.integers(2, 6))) for _ in range(queries)]
    embedder = await kb.embedder()
    vectors = [np.asarray(await embedder.embed_query(q), dtype=np.float32) for q in texts]

    def vector_leg(v: np.ndarray, where: Any, leg_ef: int) -> Any:
        query = table.query().nearest_to(v / np.linalg.norm(v)).distance_type("cosine").select(list(CHUNK_COLUMNS))
        query = query.limit(rows).ef(max(leg_ef, rows * refine)).refine_factor(refine)
        return query.where(where) if where is not None else query

    def keyword_leg(q: str, where: Any) -> Any:
        query = table.query().nearest_to_text(q, columns=["content_fts"]).select([*CHUNK_COLUMNS, "vector"])
        return query.limit(rows).where(where) if where is not None else query.limit(rows)

    per_query: dict[str, list[float]] = defaultdict(list)
    for i, (q, v) in enumerate(zip(texts, vectors, strict=True)):
        legs = {
            f"vector, prefiltered (ef {ef})": lambda v=v: vector_leg(v, prefilter.expression, ef),
            f"vector, unfiltered (ef {unfiltered_ef})": lambda v=v: vector_leg(v, None, unfiltered_ef),
            "full text, prefiltered": lambda q=q: keyword_leg(q, prefilter.expression),
            "full text, unfiltered": lambda q=q: keyword_leg(q, None),
        }
        for name, build in legs.items():
            started = time.perf_counter()
            await build().to_arrow()
            spent = {"in all": (time.perf_counter() - started) * 1000}
            started = time.perf_counter()
            await build().explain_plan()
            spent["planning alone"] = (time.perf_counter() - started) * 1000
            started = time.perf_counter()
            plan = await build().analyze_plan()
            spent["analyzed: outside execution"] = (time.perf_counter() - started) * 1000 - executed(plan)
            spent["analyzed: execution"] = executed(plan)
            if "prefiltered" in name:
                spent["the mask (ScalarIndexQuery)"] = metric(plan, "ScalarIndexQuery", "elapsed")
            if name.startswith("vector"):
                spent["HNSW walk (index_search_time)"] = metric(plan, "ANNSubIndex", "index_search_time")
            else:
                spent["full-text search (MatchQuery, with the mask)"] = metric(plan, "MatchQuery", "elapsed")
            if i:  # the first query warms caches
                for part, ms in spent.items():
                    per_query[f"{name}: {part}"].append(ms)
    await kb.close()
    medians = {name: statistics.median(ms) for name, ms in per_query.items()}
    return {"chunks": await _rows(path), "ef": ef, "queries": queries - 1, "ms": medians}


async def _rows(path: Path) -> int:
    kb = await KnowledgeBase.open(settings_for(path))
    try:
        return await kb.store.table(schema.CHUNKS).count_rows()
    finally:
        await kb.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", type=Path, default=Path(__file__).resolve().parent / "results" / "rebuild")
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=12)
    args = parser.parse_args()
    host = machine()
    result = anyio.run(split, args.dir / f"synthetic-{args.size}.lancedb", args.queries + 1)
    chunks, ef = result["chunks"], result["ef"]
    print(f"{chunks:,} chunks, a tenth of the documents passing, ef {ef}; medians of {args.queries}")
    for name, ms in result["ms"].items():
        print(f"  {name:>80} {ms:7.1f} ms")
    print(f"{describe()}; load at the start {host['load_1_5_15']}, at the end {machine()['load_1_5_15']}")
    print(json.dumps({"bench": "view_split", "machine": host, **result}))


if __name__ == "__main__":
    main()
