"""Hybrid search latency with context expansion at 10k and 100k chunks, and HNSW recall.

Baseline, measured in the same run on the same tables, query by query: embedding the query
plus LanceDB's own hybrid query (vector + FTS, RRF), without prefilter or expansion, with the
work our legs do: its limit is `search.candidates`, which lancedb 0.40's hybrid query gives each
leg as its own limit (``AsyncHybridQuery._create_child_queries``), so each leg fetches the rows
ours fetch, at the ef and refine factor our vector leg sends. (Our full-text leg also reads its
rows' vectors, for their exact cosine: LanceDB's query has one column list for both legs.) A
second baseline, LanceDB's hybrid query for the 15 rows a search shows and merges, is printed
beside it, labelled, for continuity with the figures taken before the legs fetched
`search.candidates` rows each. Both baselines pay the same query embedding as ours, so the
per-query difference is what our layer adds. The sides alternate which goes first. Reported:
each side's p50/p95 and the median of the per-query differences (not a difference of medians),
and filtered views passing a tenth and nine tenths of the documents (p50, and the median
per-query ratio to the unfiltered search).

Recall@10 of the vector leg (HNSW with the configured ef and refine factor against an exact
scan of all vectors as ground truth), where the table has a vector index (>= 50k chunks).

Then (unless `--skip maintenance`) 1,000 documents are added to a hard-linked copy of the largest
knowledge base and folded into its indexes, with search p50 and recall after each step
(bench/_maintenance.py).

With `--baseline REV` each run measures the code of git revision REV and this tree, in turns
(who goes first alternates per run), each in its own process over the same tables.

    python bench/search.py [--sizes 10000 100000] [--queries 60] [--runs 3] [--baseline REV] [--dir bench/results]
Targets (2 cores): p50 <= 25 ms at 10k, <= 60 ms at 100k.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

if "--code" in sys.argv:  # a side of --baseline: import mcp_analysis from that checkout, before anything does
    sys.path.insert(0, sys.argv[sys.argv.index("--code") + 1])
    import mcp_analysis  # noqa: F401

import anyio
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _index_choices import index_choices
from _machine import describe, machine
from _search_report import report_details
from _synthetic import build, settings_for, vocabulary

from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.search.settings import SearchSettings
from mcp_analysis.store import schema

LIMIT = 5
# The older baseline's limit: the rows a search over-fetched when it was one LanceDB hybrid query
# (merged neighbours drop out later). The legs fetch `search.candidates` rows each since.
FETCHED = 2 * LIMIT + 5
COLUMNS = ["id", "document_id", "content", "metadata", "order"]
FILTER = "metadata LIKE '%\"group\": 3%'"  # a tenth of the documents
FILTER_MOST = "metadata NOT LIKE '%\"group\": 3%'"  # nine tenths


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


# The exact 10 nearest chunks of each query (a flat scan of every vector: seconds at 1M), kept for
# the run: the recalls of `measure` and the index choices share them. Keyed by the table's version
# too: the maintenance steps write rows between two looks at the same copy.
TRUTH: dict[tuple[str, int, str], set[str]] = {}


async def exact_10(table: Any, vector: np.ndarray, where: Any = None) -> set[str]:
    exact = table.query().nearest_to(vector).distance_type("cosine").bypass_vector_index().select(["id"])
    return {r["id"] for r in await (exact.where(where) if where is not None else exact).limit(10).to_list()}


async def truth_for(table: Any, path: Path, queries: list[str], vectors: list[np.ndarray]) -> list[set[str]]:
    """The exact top 10 of each query (unfiltered), scanned once per run and version of the table."""
    version = await table.version()
    for q, v in zip(queries, vectors, strict=True):
        if (str(path), version, q) not in TRUTH:
            TRUTH[(str(path), version, q)] = await exact_10(table, v)
    return [TRUTH[(str(path), version, q)] for q in queries]


async def recall_at_10(
    table: Any,
    vectors: list[np.ndarray],
    ef: int,
    refine_factor: int,
    limit: int,
    where: Any = None,
    truth: list[set[str]] | None = None,
) -> float:
    """Mean share of the exact top 10 (`truth`, when given: unfiltered) among the first 10 of an
    indexed search for `limit` rows (both under the prefilter `where`, when given)."""
    found = []
    for i, v in enumerate(vectors):
        ann = table.query().nearest_to(v).distance_type("cosine").ef(ef).refine_factor(refine_factor).select(["id"])
        if where is not None:
            ann = ann.where(where)
        ann = await ann.limit(limit).to_list()
        exact = truth[i] if truth is not None and where is None else await exact_10(table, v, where)
        found.append(len({r["id"] for r in ann[:10]} & exact) / 10)
    return statistics.mean(found)


async def sampled_recall(
    kb: KnowledgeBase, view: Any, plan: Any, vectors: list[np.ndarray], settings: SearchSettings
) -> float:
    """`recall_at_10` of a view's vector leg in the sampled form its plan chose (`LanceLegs.sampled`: the index
    walked unfiltered, the view's rows among those found ranked exactly), under the prefilter where it fell short."""
    import math

    from mcp_analysis.store.candidates import POST_FILTER_MARGIN, VIEW_REFINE_FACTOR, sampled_breadth

    legs = await kb.store.scanner_legs(settings.scanner_min_chunks)
    table = kb.store.table(schema.CHUNKS)
    over = math.ceil(settings.candidates * POST_FILTER_MARGIN / plan.share)
    found = []
    for v in vectors:
        unit = np.asarray(v, dtype=np.float32) / np.linalg.norm(v)
        breadth = sampled_breadth(settings.ann_ef, plan.share)
        rows = legs.sampled(plan.rows.version, unit, ["id"], settings.candidates, over, view.passes, ef=breadth)
        if rows is None:
            width = plan.ef(settings.ann_ef, settings.candidates * settings.ann_refine_factor)
            rows = legs.vector(
                plan.rows.version,
                unit,
                ["id"],
                settings.candidates,
                plan.rows.allowed or view.expression.to_sql(),
                ef=width,
                refine_factor=VIEW_REFINE_FACTOR,
            )
        found.append(len({r["id"] for r in rows[:10]} & await exact_10(table, v, view.expression)) / 10)
    return statistics.mean(found)


async def measure_side(path: Path, queries: list[str]) -> dict[str, Any]:
    """A side of --baseline: search p50/p95 alone (the code of another revision may lack what the
    rest of `measure` reads, e.g. the store's candidates the phases time)."""
    kb = await KnowledgeBase.open(settings_for(path))
    corpus = kb.corpus()
    for q in queries[:5]:
        await corpus.search(q, LIMIT)
    spent = []
    for q in queries:
        started = time.perf_counter()
        await corpus.search(q, LIMIT)
        spent.append((time.perf_counter() - started) * 1000)
    chunks = await kb.store.table(schema.CHUNKS).count_rows()
    await kb.close()
    return {"chunks": chunks, "p50_ms": statistics.median(spent), "p95_ms": pct(spent, 95)}


async def measure(path: Path, queries: list[str], mode: str = "hybrid") -> dict[str, Any]:
    from _search_phases import phases

    kb = await KnowledgeBase.open(settings_for(path, search={"mode": mode}))
    corpus = kb.corpus()
    embedder = await kb.embedder()
    search_settings = kb.settings.search
    table = kb.store.table(schema.CHUNKS)

    async def ours(q: str) -> None:
        await corpus.search(q, LIMIT)

    per_leg = search_settings.candidates  # what each of our legs fetches (keyword mode: see lancedb_alone)
    refine = search_settings.ann_refine_factor
    ef = max(search_settings.ann_ef, per_leg * refine)  # as StoreCandidates.candidates sends it

    async def lancedb_alone(q: str, rows: int) -> None:
        if mode == "keyword":  # the full-text leg alone, as LanceDB runs it
            fts = table.query().nearest_to_text(q, columns=["content_fts"]).select(COLUMNS)
            await fts.limit(rows).to_list()
            return
        vector = await embedder.embed_query(q)
        query = table.query().nearest_to(vector).distance_type("cosine").nearest_to_text(q, columns=["content_fts"])
        await query.select(COLUMNS).limit(rows).ef(max(ef, rows * refine)).refine_factor(refine).to_list()

    async def baseline(q: str) -> None:  # the same rows per leg as ours
        await lancedb_alone(q, per_leg if mode != "keyword" else FETCHED)

    async def baseline_15(q: str) -> None:  # the older baseline, for continuity
        await lancedb_alone(q, FETCHED)

    async def timed(func: Any, q: str) -> float:
        started = time.perf_counter()
        await func(q)
        return (time.perf_counter() - started) * 1000

    filtered = await kb.open_corpus(FILTER)

    async def ours_filtered(q: str) -> None:
        await filtered.search(q, LIMIT)

    most = await kb.open_corpus(FILTER_MOST)

    async def ours_most(q: str) -> None:
        await most.search(q, LIMIT)

    for q in queries[:5]:  # warm caches and indexes
        for func in (ours, baseline, baseline_15, ours_filtered, ours_most):
            await func(q)
    full: list[float] = []
    base: list[float] = []
    base_15: list[float] = []
    flt: list[float] = []
    flt_most: list[float] = []
    for i, q in enumerate(queries):  # who goes first rotates per query
        sides = [(full, ours), (base, baseline), (base_15, baseline_15), (flt, ours_filtered), (flt_most, ours_most)]
        for spent, func in sides[i % 5 :] + sides[: i % 5]:
            spent.append(await timed(func, q))
    differences = [f - b for f, b in zip(full, base, strict=True)]
    differences_15 = [f - b for f, b in zip(full, base_15, strict=True)]
    embed = [await timed(embedder.embed_query, q) for q in queries[:20]]

    indexes = (await kb.store.index_names()).get(schema.CHUNKS, [])
    has_vector_index = any(ix.endswith("(vector)") for ix in indexes)
    vectors = [await embedder.embed_query(q) for q in queries]
    recall = leg_recall = filtered_recall = None
    # The ef the filtered view's vector leg runs with under its prefilter, as the store's plan chooses it.
    from mcp_analysis.search.hybrid import view_legs  # this tree's (measure runs no --baseline side)

    plan = await kb.store.view_plan(await kb.prefilter(filtered.filter), view_legs(search_settings), vector=True)
    filtered_ef = plan.ef(search_settings.ann_ef, search_settings.candidates * search_settings.ann_refine_factor)
    if has_vector_index:
        ef, refine = search_settings.ann_ef, search_settings.ann_refine_factor
        truth = await truth_for(table, path, queries, vectors)
        recall = await recall_at_10(table, vectors, max(ef, 10 * refine), refine, 10, truth=truth)
        leg_recall = await recall_at_10(table, vectors, ef, refine, search_settings.candidates, truth=truth)
        if filtered_ef is not None and plan.sampled:
            view = await kb.prefilter(filtered.filter)
            filtered_recall = await sampled_recall(kb, view, plan, vectors, search_settings)
        elif filtered_ef is not None:
            where = (await kb.prefilter(filtered.filter)).expression
            filtered_recall = await recall_at_10(
                table, vectors, filtered_ef, plan.refine(refine), search_settings.candidates, where
            )
    breakdown = await phases(kb, corpus, embedder, queries[:30], LIMIT, with_vector_leg=mode != "keyword")
    filtered_breakdown = await phases(kb, filtered, embedder, queries[:20], LIMIT, with_vector_leg=mode != "keyword")
    chunks = await table.count_rows()
    spans_s, spans_documents = await _item_spans_scan(kb)
    index_mb = {
        f"{ix.index_type}({', '.join(ix.columns)})": round((getattr(ix, "size_bytes", 0) or 0) / 1e6, 1)
        for ix in await table.list_indices()
    }
    await kb.close()
    return {
        "chunks": chunks,
        "p50_ms": statistics.median(full),
        "p95_ms": pct(full, 95),
        "baseline_p50_ms": statistics.median(base),
        "baseline_p95_ms": pct(base, 95),
        "added_p50_ms": statistics.median(differences),  # median of per-query differences
        "added_p25_ms": pct(differences, 25),
        "added_p75_ms": pct(differences, 75),
        "baseline_rows_per_leg": per_leg if mode != "keyword" else FETCHED,
        "baseline_15_p50_ms": statistics.median(base_15),  # LanceDB's query for FETCHED rows (older tables)
        "added_vs_15_p50_ms": statistics.median(differences_15),
        "embed_p50_ms": statistics.median(embed),
        "filtered_p50_ms": statistics.median(flt),
        "filtered_ratio": statistics.median(f / u for f, u in zip(flt, full, strict=True)),  # per query
        "filtered_most_p50_ms": statistics.median(flt_most),  # a view passing nine tenths of the documents
        "filtered_most_ratio": statistics.median(f / u for f, u in zip(flt_most, full, strict=True)),
        "vector_index": has_vector_index,
        "recall_at_10": recall,  # a search for 10 rows, as the earlier figures were measured
        "leg_recall_at_10": leg_recall,  # the first 10 of the vector leg as search fetches it
        "filtered_leg_recall_at_10": filtered_recall,  # the same under the filter's prefilter, at its ef
        "filtered_ef": filtered_ef,
        "phases_ms": breakdown,
        "filtered_phases_ms": filtered_breakdown,
        "index_mb": index_mb,  # on disk, per index of the chunks table
        "item_spans_s": spans_s,  # the scan that finds where each document's items sit (store/item_offsets.py)
        "item_spans_documents": spans_documents,
        "mode": mode,
        "ef": search_settings.ann_ef,
        "refine_factor": search_settings.ann_refine_factor,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--runs", type=int, default=1, help="Repeat the measurement (same tables, same queries).")
    parser.add_argument("--dir", type=Path, default=Path(__file__).resolve().parent / "results")
    parser.add_argument("--baseline", help="git revision measured against this tree, in turns")
    parser.add_argument(
        "--skip", nargs="*", default=[], choices=["indexes", "maintenance"], help="Leave out index choices / the add."
    )
    parser.add_argument(
        "--index-builds-up-to",
        type=int,
        default=100_000,
        help="Build and measure other index types up to this size (minutes each); larger sizes: own index only.",
    )
    parser.add_argument("--add-docs", type=int, default=1000, help="Documents added to the largest size (maintenance).")
    parser.add_argument(
        "--more-adds", type=int, default=0, help="Then this many adds of a tenth as many documents, each optimized."
    )
    parser.add_argument(
        "--max-segments",
        type=int,
        default=SearchSettings().vector_index_max_segments,
        help="search.vector_index_max_segments for each Store.optimize of the add (0: LanceDB's optimize alone).",
    )
    parser.add_argument(
        "--rebuild",
        nargs="*",
        default=[],
        choices=["scalar", "vector"],
        help="After the add, also time building these indexes of the chunks table again (vector: a build's time).",
    )
    parser.add_argument(
        "--mode",
        choices=["hybrid", "keyword"],
        default="hybrid",
        help="keyword: search.mode keyword against LanceDB's full-text query alone (no vector index needed).",
    )
    parser.add_argument("--code", type=Path, help=argparse.SUPPRESS)  # one side of --baseline
    args = parser.parse_args()
    if args.baseline:
        compare(args)
        return
    host = machine()
    words = vocabulary()
    rng = np.random.default_rng(3)
    queries = [" ".join(words[i] for i in rng.choice(400, size=rng.integers(2, 6))) for _ in range(args.queries)]
    rows: list[dict[str, Any]] = []
    choices: dict[int, list[dict[str, Any]]] = {}
    added: dict[str, Any] | None = None
    for size in args.sizes:
        path = args.dir / f"synthetic-{size}.lancedb"
        started = time.perf_counter()
        anyio.run(build, path, size)
        print(f"built/checked {path} in {time.perf_counter() - started:.1f} s", file=sys.stderr)
        for run in range(args.runs):
            if args.code:
                rows.append({"run": run + 1, **anyio.run(measure_side, path, queries)})
                continue
            rows.append({"run": run + 1, **anyio.run(measure, path, queries, args.mode)})
        if "indexes" not in args.skip and not args.code and rows[-1]["vector_index"]:
            choices[size] = anyio.run(measure_index_choices, path, queries[:40], size <= args.index_builds_up_to)
    if "maintenance" not in args.skip and not args.code and args.add_docs:
        from _maintenance import add_documents

        largest = args.dir / f"synthetic-{max(args.sizes)}.lancedb"
        ef = settings_for(largest).search.ann_ef
        state = functools.partial(search_state, queries=queries)
        added = anyio.run(
            add_documents, largest, args.add_docs, state, args.rebuild, ef, args.more_adds, args.max_segments
        )
    if args.code:
        print(json.dumps(rows))
        return
    print(
        f"{'chunks':>8} {'run':>3} {'p50 ms':>7} {'p95 ms':>7} {'base p50':>9} {'base p95':>9} "
        f"{'added p50 (IQR)':>18} {'embed':>6} {'filtered (x)':>14} {'9/10 view (x)':>14} "
        f"{'recall@10 10/leg/filtered':>25} {'base15 p50':>10} {'added vs 15':>11}"
    )
    nan = float("nan")  # a --baseline side's rows lack the older baseline
    for r in rows:
        extra = f"{r['added_p50_ms']:.1f} ({r['added_p25_ms']:.1f}-{r['added_p75_ms']:.1f})"
        filtered = f"{r['filtered_p50_ms']:.1f} ({r['filtered_ratio']:.2f})"
        most = "-"
        if "filtered_most_ratio" in r:  # a --baseline side's rows may lack it
            most = f"{r['filtered_most_p50_ms']:.1f} ({r['filtered_most_ratio']:.2f})"
        recall = "no index"
        if r["recall_at_10"] is not None:
            filtered_recall = r.get("filtered_leg_recall_at_10")
            filtered_recall = "-" if filtered_recall is None else f"{filtered_recall:.3f}"
            recall = f"{r['recall_at_10']:.3f}/{r['leg_recall_at_10']:.3f}/{filtered_recall}"
        print(
            f"{r['chunks']:>8} {r['run']:>3} {r['p50_ms']:>7.1f} {r['p95_ms']:>7.1f} {r['baseline_p50_ms']:>9.1f} "
            f"{r['baseline_p95_ms']:>9.1f} {extra:>18} {r['embed_p50_ms']:>6.1f} {filtered:>14} {most:>14} "
            f"{recall:>25} {r.get('baseline_15_p50_ms', nan):>10.1f} {r.get('added_vs_15_p50_ms', nan):>11.1f}"
        )
    base = "LanceDB's full-text query alone" if args.mode == "keyword" else "query embedding + plain LanceDB hybrid"
    rows_per_leg = rows[-1].get("baseline_rows_per_leg", FETCHED) if rows else FETCHED
    print(
        f"(base = {base}, limit {rows_per_leg}: each leg fetches the rows ours fetch, same ef/refine; "
        f"base15 = the same for {FETCHED} rows, the older tables' baseline; "
        "added = median of per-query differences, ours - base)"
    )
    report_details(rows, choices, added)
    print(f"{describe()}; load at the end {machine()['load_1_5_15']}")
    summary = {"bench": "search", "machine": host, "limit": LIMIT, "fetched": FETCHED, "results": rows}
    print(json.dumps({**summary, "index_choices": choices, "add": added}))


async def measure_index_choices(path: Path, queries: list[str], builds: bool) -> list[dict[str, Any]]:
    kb = await KnowledgeBase.open(settings_for(path))
    embedder = await kb.embedder()
    vectors = [await embedder.embed_query(q) for q in queries]
    try:
        table = kb.store.table(schema.CHUNKS)
        truth = await truth_for(table, path, queries, vectors)
        return await index_choices(path, table, vectors, kb.settings.search.candidates, builds, truth)
    finally:
        await kb.close()


async def search_state(path: Path, queries: list[str]) -> dict[str, float]:
    """Search p50 over 20 queries and the vector leg's recall@10 over 10 (as `measure` takes them)."""
    kb = await KnowledgeBase.open(settings_for(path))
    corpus = kb.corpus()
    spent = []
    for q in queries[:20]:
        started = time.perf_counter()
        await corpus.search(q, LIMIT)
        spent.append((time.perf_counter() - started) * 1000)
    embedder = await kb.embedder()
    vectors = [await embedder.embed_query(q) for q in queries[:10]]
    table = kb.store.table(schema.CHUNKS)
    truth = await truth_for(table, path, queries[:10], vectors)  # scanned again after each write
    s = kb.settings.search
    recall = await recall_at_10(table, vectors, s.ann_ef, s.ann_refine_factor, s.candidates, truth=truth)
    await kb.close()
    return {"p50 ms": statistics.median(spent), "leg recall@10": recall}


async def _item_spans_scan(kb: Any) -> tuple[float | None, int | None]:
    """Seconds the store's scan of the items table takes at this version, and the documents it finds
    in one run (None, None with code that reads no windows by offset: a --baseline side)."""
    try:
        from mcp_analysis.store.item_offsets import ItemSpans
    except ImportError:
        return None, None
    dataset = await kb.store.table(schema.DOCUMENT_ITEMS).to_lance()
    started = time.perf_counter()
    spans = await anyio.to_thread.run_sync(ItemSpans.scan, dataset, dataset.version)
    return time.perf_counter() - started, len(spans.ids)


def compare(args: argparse.Namespace) -> None:
    """Each run: the baseline's code and this tree's, in turns, each in a process of its own."""
    from context import baseline_checkout

    host = machine()
    root = Path(__file__).resolve().parent.parent
    out: dict[str, list[dict[str, Any]]] = {"base": [], "new": []}
    with baseline_checkout(args.baseline) as tree:
        for run in range(args.runs):
            sides = [("base", tree), ("new", root)]
            for side, code in sides if run % 2 == 0 else reversed(sides):
                command = [sys.executable, __file__, "--sizes", *map(str, args.sizes), "--queries", str(args.queries)]
                command += ["--runs", "1", "--dir", str(args.dir), "--code", str(code)]
                env = {**os.environ, "PYTHONPATH": str(code)}
                done = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
                out[side] += [{"run": run + 1, **row} for row in json.loads(done.stdout.strip().splitlines()[-1])]
    print(f"{'chunks':>8} {'run':>3} {'base p50':>9} {'new p50':>8} {'ratio':>6} {'base p95':>9} {'new p95':>8}")
    for a, b in zip(out["base"], out["new"], strict=True):
        print(
            f"{a['chunks']:>8} {a['run']:>3} {a['p50_ms']:>9.1f} {b['p50_ms']:>8.1f} {b['p50_ms'] / a['p50_ms']:>6.2f} "
            f"{a['p95_ms']:>9.1f} {b['p95_ms']:>8.1f}"
        )
    print(f"(base = {args.baseline}, new = this tree; search through Corpus.search, limit {LIMIT})")
    print(f"{describe()}; load at the end {machine()['load_1_5_15']}")
    print(json.dumps({"bench": "search", "baseline": args.baseline, "machine": host, **out}))


if __name__ == "__main__":
    main()
