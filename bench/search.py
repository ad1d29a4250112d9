"""Hybrid search latency with context expansion at 10k and 100k chunks.

Baseline, measured in the same run on the same tables and query vectors: LanceDB's own
hybrid query (vector + FTS, RRF) without prefilter or expansion.

    python bench/search.py [--sizes 10000 100000] [--queries 60] [--dir bench/results]
Targets (2 cores): p50 <= 25 ms at 10k, <= 60 ms at 100k.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import anyio
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _synthetic import build, settings_for, vocabulary

from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.store import schema


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


async def measure(path: Path, queries: list[str]) -> dict[str, float]:
    kb = await KnowledgeBase.open(settings_for(path))
    corpus = kb.corpus()
    embedder = await kb.embedder()
    vectors = [await embedder.embed_query(q) for q in queries]
    table = kb.store.table(schema.CHUNKS)
    for q in queries[:5]:  # warm caches and indexes
        await corpus.search(q, 5)

    full, base, embed = [], [], []
    for q, v in zip(queries, vectors, strict=True):
        t = time.perf_counter()
        await embedder.embed_query(q)
        embed.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        await corpus.search(q, 5)
        full.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        await (
            table.query()
            .nearest_to(v)
            .distance_type("cosine")
            .nearest_to_text(q, columns=["content_fts"])
            .select(["id", "document_id", "content", "metadata", "order"])
            .limit(5)
            .to_list()
        )
        base.append((time.perf_counter() - t) * 1000)
    filtered = await kb.open_corpus("metadata LIKE '%\"group\": 3%'")
    flt = []
    for q in queries[:20]:
        t = time.perf_counter()
        await filtered.search(q, 5)
        flt.append((time.perf_counter() - t) * 1000)
    chunks = await table.count_rows()
    await kb.close()
    return {
        "chunks": chunks,
        "p50_ms": statistics.median(full),
        "p95_ms": pct(full, 95),
        "p50_excl_embed_ms": statistics.median(full) - statistics.median(embed),
        "embed_p50_ms": statistics.median(embed),
        "baseline_p50_ms": statistics.median(base),
        "baseline_p95_ms": pct(base, 95),
        "filtered_p50_ms": statistics.median(flt),
        "ratio_p50": statistics.median(full) / statistics.median(base),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--dir", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args()
    words = vocabulary()
    rng = np.random.default_rng(3)
    queries = [" ".join(words[i] for i in rng.choice(400, size=rng.integers(2, 6))) for _ in range(args.queries)]
    rows = []
    for size in args.sizes:
        path = args.dir / f"synthetic-{size}.lancedb"
        started = time.perf_counter()
        anyio.run(build, path, size)
        print(f"built/checked {path} in {time.perf_counter() - started:.1f} s", file=sys.stderr)
        rows.append(anyio.run(measure, path, queries))
    print(
        f"{'chunks':>8} {'p50 ms':>8} {'p95 ms':>8} {'excl.emb':>9} {'embed':>6} {'base p50':>9} "
        f"{'base p95':>9} {'filtered':>9} {'ratio':>6}"
    )
    for r in rows:
        print(
            f"{r['chunks']:>8} {r['p50_ms']:>8.1f} {r['p95_ms']:>8.1f} {r['p50_excl_embed_ms']:>9.1f} "
            f"{r['embed_p50_ms']:>6.1f} {r['baseline_p50_ms']:>9.1f} {r['baseline_p95_ms']:>9.1f} "
            f"{r['filtered_p50_ms']:>9.1f} {r['ratio_p50']:>6.2f}"
        )
    print(json.dumps({"bench": "search", "results": rows}))


if __name__ == "__main__":
    main()
