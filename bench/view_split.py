"""Where a filtered view's legs spend their time, part by part (bench/search.py times the whole).

For the view `bench/search.py` times as "a tenth passes" (``metadata LIKE '%"group": 3%'``), on a
cached synthetic knowledge base, each leg as the store sends it under the view's prefilter (the
`VisibleDocuments` expression, at the ef the store's plan gives the view: `ViewPlan.ef`) and
unfiltered, query by query: its time in all; LanceDB planning it alone (``explain_plan``); and from
``analyze_plan`` (the query run with DataFusion's metrics) its execution, the prefilter's mask (the
``ScalarIndexQuery`` node: the view's ids looked up in the ``document_id`` index), the HNSW walk
(``index_search_time`` of ``ANNSubIndex``) or the full-text search (``MatchQuery``, which holds the
mask). Medians in ms, the first query warming caches.

With `--allowlist`, the form Lance's own scanner offers instead (pylance's ``row_addr_allowlist``: the
view's chunk row ids, looked up once, given to each leg as a serialized set applied before it ranks;
lancedb 0.40's queries do not take it): both legs under the prefilter as the store sends them and under
the allowlist, each alone and both at once (as a search runs them), whether they return the same rows,
and what the allowlist costs once: its lookup, the process's resident memory before and after pylance's
import and after the Lance dataset's first query, and that first query's time (it loads the indexes into
a cache of its own); and an exact scan of a view of 100 documents under its allowlist and its expression.

    python bench/view_split.py [--dir bench/results/rebuild] [--size 1000000] [--queries 12] [--allowlist]
"""

from __future__ import annotations

import argparse
import dataclasses
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
from mcp_analysis.search.hybrid import view_legs
from mcp_analysis.store import schema
from mcp_analysis.store.candidates import CHUNK_COLUMNS, VisibleDocuments

_UNITS = {"s": 1000.0, "ms": 1.0, "µs": 1e-3, "ns": 1e-6}


def metric(plan: str, node: str, key: str) -> float:
    """A time metric (ms) of the first `node` of an analyzed plan (nan when it has none)."""
    line = next((line for line in plan.splitlines() if line.strip().startswith(f"{node}:")), "")
    found = re.search(rf"\b{key}=([0-9.]+)(ms|µs|ns|s)\b", line)
    return float(found.group(1)) * _UNITS[found.group(2)] if found else float("nan")


def executed(plan: str) -> float:
    found = re.search(r"AnalyzeExec verbose=true, elapsed=([0-9.]+)(ms|µs|ns|s)", plan)
    return float(found.group(1)) * _UNITS[found.group(2)] if found else float("nan")


async def _view_and_queries(path: Path, queries: int) -> tuple[KnowledgeBase, Any, Any, list[str], list[np.ndarray]]:
    """The knowledge base, its chunks table, the view's prefilter, and `queries` questions of 2-5 of the
    corpus's words with their vectors (the same in every run)."""
    kb = await KnowledgeBase.open(settings_for(path))
    view = await kb.open_corpus(FILTER)
    prefilter = await kb.prefilter(view.filter)
    assert prefilter is not None
    words, rng = vocabulary(), np.random.default_rng(5)
    texts = [" ".join(words[i] for i in rng.choice(400, size=rng.integers(2, 6))) for _ in range(queries)]
    embedder = await kb.embedder()
    vectors = [np.asarray(await embedder.embed_query(q), dtype=np.float32) for q in texts]
    return kb, kb.store.table(schema.CHUNKS), prefilter, texts, vectors


async def split(path: Path, queries: int) -> dict[str, Any]:
    kb, table, prefilter, texts, vectors = await _view_and_queries(path, queries)
    ef, settings, rows = await _view_ef(kb, prefilter), kb.settings.search, 50
    unfiltered_ef, refine = settings.ann_ef, settings.ann_refine_factor

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


async def _view_ef(kb: KnowledgeBase, prefilter: Any, scanner: bool = True) -> int:
    """The ef of the view's vector leg under its prefilter, as the store's plan chooses it (without `scanner`,
    its chunks counted through LanceDB: pylance not imported yet)."""
    settings = kb.settings.search
    legs = view_legs(settings) if scanner else dataclasses.replace(view_legs(settings), scanner_min_rows=2**62)
    plan = await kb.store.view_plan(prefilter, legs, vector=True)
    return plan.ef(settings.ann_ef, settings.candidates * settings.ann_refine_factor)


def _rss_mb() -> int:
    with open("/proc/self/status") as status:
        return int(next(line for line in status if line.startswith("VmRSS")).split()[1]) // 1024


async def allowlist(path: Path, queries: int) -> dict[str, Any]:
    """The legs under the view's prefilter expression and under a row-id allowlist of its chunks."""
    kb, table, prefilter, texts, vectors = await _view_and_queries(path, queries)
    ef, refine, rows = await _view_ef(kb, prefilter, scanner=False), kb.settings.search.ann_refine_factor, 50
    vectors = [v / np.linalg.norm(v) for v in vectors]
    where = prefilter.expression

    async def vector_expr(_q: str, v: np.ndarray) -> list[str]:
        query = table.query().nearest_to(v).distance_type("cosine").select(list(CHUNK_COLUMNS)).limit(rows)
        return [r["id"] for r in await query.ef(max(ef, rows * refine)).refine_factor(refine).where(where).to_list()]

    async def keyword_expr(q: str, _v: np.ndarray) -> list[str]:
        query = table.query().nearest_to_text(q, columns=["content_fts"]).select([*CHUNK_COLUMNS, "vector"])
        return (await query.limit(rows).where(where).to_arrow()).column("id").to_pylist()

    for q, v in zip(texts[:1], vectors[:1], strict=True):  # LanceDB's caches warm before the memory is read
        await vector_expr(q, v), await keyword_expr(q, v)
    before = _rss_mb()
    import lance
    from lance.dataset import serialize_row_addrs

    imported = _rss_mb()
    started = time.perf_counter()
    dataset = lance.dataset(await table.uri(), version=await table.version())
    ids = dataset.to_table(columns=[], filter=where.to_sql(), with_row_id=True).column("_rowid").to_pylist()
    allowed = serialize_row_addrs(ids)
    lookup_ms = (time.perf_counter() - started) * 1000
    options = {"prefilter": True, "row_addr_allowlist": allowed, "disable_scoring_autoprojection": True}

    def vector_scan(v: np.ndarray) -> list[str]:
        nearest = {"column": "vector", "q": v, "k": rows, "metric": "cosine", "ef": max(ef, rows * refine)}
        scanner = dataset.scanner(
            columns=[*CHUNK_COLUMNS, "_distance"], nearest={**nearest, "refine_factor": refine}, **options
        )
        return scanner.to_table().column("id").to_pylist()

    def keyword_scan(q: str) -> list[str]:
        text = {"query": q, "columns": ["content_fts"]}
        scanner = dataset.scanner(
            columns=[*CHUNK_COLUMNS, "vector", "_score"], full_text_query=text, limit=rows, **options
        )
        return scanner.to_table().column("id").to_pylist()

    async def vector_allowed(_q: str, v: np.ndarray) -> list[str]:
        return await anyio.to_thread.run_sync(vector_scan, v)

    async def keyword_allowed(q: str, _v: np.ndarray) -> list[str]:
        return await anyio.to_thread.run_sync(keyword_scan, q)

    started = time.perf_counter()
    await vector_allowed(texts[0], vectors[0]), await keyword_allowed(texts[0], vectors[0])
    first_ms, after = (time.perf_counter() - started) * 1000, _rss_mb()

    async def both(vector: Any, keyword: Any, q: str, v: np.ndarray) -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(vector, q, v)
            group.start_soon(keyword, q, v)

    variants = {"vector, expression": vector_expr, "vector, allowlist": vector_allowed}
    variants |= {"full text, expression": keyword_expr, "full text, allowlist": keyword_allowed}
    spent: dict[str, list[float]] = defaultdict(list)
    same = {"vector": 0, "full text": 0}
    for q, v in zip(texts[1:], vectors[1:], strict=True):
        found = {}
        for name, run in variants.items():
            started = time.perf_counter()
            found[name] = await run(q, v)
            spent[name].append((time.perf_counter() - started) * 1000)
        for leg in same:
            same[leg] += found[f"{leg}, expression"] == found[f"{leg}, allowlist"]
        for form in ("expression", "allowlist"):
            started = time.perf_counter()
            await both(variants[f"vector, {form}"], variants[f"full text, {form}"], q, v)
            spent[f"both legs at once, {form}"].append((time.perf_counter() - started) * 1000)
    flat = await _exact_scans(dataset, serialize_row_addrs, sorted(prefilter.ids)[:100], prefilter, vectors[1:4])
    await kb.close()
    return {
        "chunks": await _rows(path),
        "exact_scan_100_documents_ms": flat,
        "rss_mb_lance_imported": imported,
        "ef": ef,
        "queries": queries - 1,
        "ms": {name: statistics.median(ms) for name, ms in spent.items()},
        "same_rows": same,
        "view_rows": len(ids),
        "allowlist_bytes": len(allowed),
        "allowlist_lookup_ms": lookup_ms,
        "first_query_ms": first_ms,
        "rss_mb_before_after": [before, after],
    }


async def _exact_scans(dataset: Any, serialize: Any, ids: list[str], view: Any, vectors: list[np.ndarray]) -> Any:
    """An exact scan (no index) of a view of `ids` documents' chunks, under its allowlist and under its
    expression: Lance reads every row under the allowlist, only the view's under the expression."""
    small = VisibleDocuments.of(ids, (view.ids | (view.hidden or set())) - set(ids))
    where = small.expression.to_sql()
    allowed = serialize(dataset.to_table(columns=[], filter=where, with_row_id=True).column("_rowid").to_pylist())
    spent: dict[str, list[float]] = defaultdict(list)
    for v in vectors:
        for form, options in (("allowlist", {"row_addr_allowlist": allowed}), ("expression", {"filter": where})):
            nearest = {"column": "vector", "q": v, "k": 50, "metric": "cosine", "use_index": False}
            started = time.perf_counter()
            dataset.scanner(columns=["id", "_distance"], nearest=nearest, prefilter=True, **options).to_table()
            spent[form].append((time.perf_counter() - started) * 1000)
    return {form: statistics.median(ms) for form, ms in spent.items()}


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
    parser.add_argument("--allowlist", action="store_true", help="The legs under a row-id allowlist instead.")
    args = parser.parse_args()
    host = machine()
    run = allowlist if args.allowlist else split
    result = anyio.run(run, args.dir / f"synthetic-{args.size}.lancedb", args.queries + 1)
    chunks, ef = result["chunks"], result["ef"]
    print(f"{chunks:,} chunks, a tenth of the documents passing, ef {ef}; medians of {args.queries}")
    for name, ms in result["ms"].items():
        print(f"  {name:>80} {ms:7.1f} ms")
    if args.allowlist:
        same, rss = result["same_rows"], result["rss_mb_before_after"]
        print(
            f"  same rows in {same} of {args.queries}; the view's {result['view_rows']:,} rows in "
            f"{result['allowlist_bytes']:,} bytes"
        )
        print(f"  allowlist lookup {result['allowlist_lookup_ms']:.0f} ms, the Lance dataset's first query (both legs)")
        print(f"  {result['first_query_ms']:.0f} ms; resident memory {rss[0]} MB before pylance's import,")
        print(f"  {result['rss_mb_lance_imported']} MB after it, {rss[1]} MB after that first query")
        flat = result["exact_scan_100_documents_ms"]
        print(f"  exact scan of a view of 100 documents: {flat['allowlist']:.1f} ms under its allowlist,")
        print(f"  {flat['expression']:.1f} ms under its expression")
    print(f"{describe()}; load at the start {host['load_1_5_15']}, at the end {machine()['load_1_5_15']}")
    print(json.dumps({"bench": "view_split", "machine": host, **result}))


if __name__ == "__main__":
    main()
