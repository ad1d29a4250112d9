"""A filtered view's vector leg two ways, by the share of the documents it passes.

Under the view's prefilter (the view's chunk rows as Lance's allowlist, ef scaled by the chunks' share,
refined `VIEW_REFINE_FACTOR` times, as `Store.candidates` sends it) against the sampled form
(`LanceLegs.sampled`: the index walked unfiltered for 1.5 x 50 / share rows by its quantized
distances, only their documents read, the view's among them read whole and ranked exactly). Each on a
cached synthetic knowledge base (bench/search.py builds them), 50 rows with the columns a search
fetches, for views of random documents; p50 in ms over the queries (the first three warm caches),
recall@10 against an exact scan of the view's chunks, how many queries the sampled form left short
(it then runs the leg under the prefilter, timed in), and the unfiltered leg beside them.

    python bench/view_sample.py [--dir bench/results] [--size 1000000] [--shares 0.02 0.05 0.1 0.25] [--queries 25]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import describe, machine
from _synthetic import settings_for, vocabulary

from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.search.settings import SearchSettings
from mcp_analysis.store import schema
from mcp_analysis.store.candidates import (
    CHUNK_COLUMNS,
    POST_FILTER_MARGIN,
    VIEW_REFINE_FACTOR,
    VisibleDocuments,
    sampled_breadth,
)

WARM = 3
ROWS = 50


async def measure(path: Path, shares: list[float], queries: int, sample_ef: int | None) -> dict[str, Any]:
    settings = SearchSettings()
    words, rng = vocabulary(), np.random.default_rng(3)
    texts = [" ".join(words[i] for i in rng.choice(400, size=rng.integers(2, 6))) for _ in range(queries)]
    kb = await KnowledgeBase.open(settings_for(path))
    embedder = await kb.embedder()
    vectors = [np.asarray(await embedder.embed_query(t), dtype=np.float32) for t in texts]
    units = [v / np.linalg.norm(v) for v in vectors]
    legs = await kb.store.scanner_legs(0)
    assert legs is not None, "pylance's scanner is not available"
    version = await kb.store.table(schema.CHUNKS).version()
    dataset = legs.dataset(version)
    column = dataset.to_table(columns=["document_id"]).column("document_id")
    documents = np.unique(column.to_numpy(zero_copy_only=False))
    columns, ef = list(CHUNK_COLUMNS), settings.ann_ef

    def timed(run: Any, spent: list[float], index: int) -> Any:
        started = time.perf_counter()
        out = run()
        if index >= WARM:
            spent.append((time.perf_counter() - started) * 1000)
        return out

    unfiltered: list[float] = []
    for i, unit in enumerate(units):
        timed(lambda u=unit: legs.vector(version, u, columns, ROWS, None, ef=ef, refine_factor=4), unfiltered, i)
    out: dict[str, Any] = {"chunks": dataset.count_rows(), "unfiltered_p50": statistics.median(unfiltered), "views": []}
    view_rng = np.random.default_rng(7)
    for share in shares:
        chosen = view_rng.choice(documents, size=max(1, int(len(documents) * share)), replace=False).tolist()
        view = VisibleDocuments.of(chosen, set(documents.tolist()) - set(chosen))
        rows = await kb.store.view_rows(view, legs)
        chunk_share = rows.rows / rows.total
        over = math.ceil(ROWS * POST_FILTER_MARGIN / chunk_share)
        breadth = max(ROWS * settings.ann_refine_factor, math.ceil(ef * chunk_share))  # `ViewPlan.ef`
        walk = max(sampled_breadth(ef, chunk_share), over)
        where = view.expression.to_sql()
        spent: dict[str, list[float]] = {"prefiltered": [], "sampled": []}
        recall: dict[str, list[float]] = {"prefiltered": [], "sampled": []}
        short = 0
        for i, unit in enumerate(units):
            exact = dataset.scanner(
                columns=["id"],
                nearest={"column": "vector", "q": unit, "k": 10, "metric": "cosine", "use_index": False},
                prefilter=True,
                filter=where,
                disable_scoring_autoprojection=True,
            ).to_table()
            truth = set(exact.column("id").to_pylist())

            def prefiltered(u: np.ndarray = unit, allowed: bytes | None = rows.allowed, width: int = breadth) -> Any:
                return legs.vector(version, u, columns, ROWS, allowed, ef=width, refine_factor=VIEW_REFINE_FACTOR)

            def sampled(u: np.ndarray = unit, over: int = over, passes: Any = view.passes, walk: int = walk) -> Any:
                nonlocal short
                found = legs.sampled(version, u, columns, ROWS, over, passes, ef=sample_ef or walk)
                if found is None:
                    short += 1
                    return prefiltered(u)
                return found

            for name, run in (("prefiltered", prefiltered), ("sampled", sampled)):
                found = timed(run, spent[name], i)
                recall[name].append(len(truth & {row["id"] for row in found[:10]}) / 10)
        out["views"].append(
            {
                "share": share,
                "chunks": rows.rows,
                "over": over,
                "walk_ef": sample_ef or walk,
                "ef": breadth,
                "short": short,
                **{f"{name}_p50": statistics.median(spent[name]) for name in spent},
                **{f"{name}_recall": float(np.mean(recall[name])) for name in recall},
            }
        )
    await kb.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", type=Path, default=Path(__file__).resolve().parent / "results")
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--shares", type=float, nargs="+", default=[0.02, 0.05, 0.1, 0.25])
    parser.add_argument("--queries", type=int, default=25)
    parser.add_argument("--sample-ef", type=int, help="The sampled walk's ef (default: the store's).")
    args = parser.parse_args()
    path = args.dir / f"synthetic-{args.size}.lancedb"
    if not path.exists():
        sys.exit(f"{path} does not exist: build it first with bench/search.py --sizes {args.size}")
    result = anyio.run(measure, path, args.shares, args.queries, args.sample_ef)
    print(
        f"vector leg, {ROWS} rows; {result['chunks']} chunks; unfiltered p50 {result['unfiltered_p50']:.1f} ms; "
        f"the sampled walk's ef {args.sample_ef or 'as the store sets it (in brackets)'}"
    )
    print("documents | chunks | prefiltered p50 (ef) | recall@10 | sampled p50 (rows, ef) | recall@10 | short")
    for v in result["views"]:
        print(
            f"{v['share']:>9.0%} | {v['chunks']:>6} | {v['prefiltered_p50']:6.1f} ms ({v['ef']}) | "
            f"{v['prefiltered_recall']:.3f} | {v['sampled_p50']:6.1f} ms ({v['over']}, ef {v['walk_ef']}) | "
            f"{v['sampled_recall']:.3f} | {v['short']}"
        )
    print(f"{describe()}; load at the end {machine()['load_1_5_15']}")
    print(json.dumps({"bench": "view_sample", "machine": machine(), **result}))


if __name__ == "__main__":
    main()
