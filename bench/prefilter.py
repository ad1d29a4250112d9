"""What a document filter's prefilter costs each leg of a search, by how many documents it passes.

A filtered view searches under ``document_id IN (<every visible document>)`` (corpus.py). On a
cached synthetic knowledge base (bench/search.py builds them), for views passing `--docs`
documents: LanceDB planning the prefilter alone (``explain_plan``), the full-text leg as the
store runs it (50 rows) unfiltered and under the prefilter given as SQL text and as a LanceDB
``Expr`` (no SQL parsing), and with a vector index, the vector leg under the prefilter at
ef 512 and at the ef the view scales to (ef x share, at least the 200 rows it refines).
With `--bitmap`, the same on a hard-linked copy of the chunks table whose ``document_id``
index is a Bitmap instead of a B-tree. Variants alternate query by query; medians in ms.

    python bench/prefilter.py [--size 1000000] [--docs 50 500 5000] [--queries 12] [--bitmap]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import lancedb
import numpy as np
from lancedb.expr import col
from lancedb.index import Bitmap

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import describe, machine
from _synthetic import vocabulary

from mcp_analysis.search.settings import SearchSettings
from mcp_analysis.store.candidates import CHUNK_COLUMNS, POST_FILTER_MARGIN, VisibleDocuments
from mcp_analysis.store.filters import sql_in

PER_LEG, REFINE, EF = 50, 4, 512


async def bitmap_copy(kb: Path) -> Any:
    """The chunks table of a hard-linked copy of `kb` with a Bitmap index on document_id."""
    copy = kb.parent / f"{kb.stem}-bitmap"
    if not (copy / "chunks.lance").exists():
        shutil.rmtree(copy, ignore_errors=True)
        copy.mkdir()
        shutil.copytree(kb / "chunks.lance", copy / "chunks.lance", copy_function=os.link)
    table = await (await lancedb.connect_async(str(copy))).open_table("chunks")
    if not any(ix.index_type == "Bitmap" for ix in await table.list_indices()):
        for ix in await table.list_indices():
            if ix.columns == ["document_id"]:
                await table.drop_index(ix.name)
        await table.create_index("document_id", config=Bitmap())
    return table


def legs(table: Any, where: Any, share: float, has_vector: bool) -> dict[str, Callable[[str, np.ndarray], Any]]:
    def keyword(q: str, _v: np.ndarray) -> Any:
        query = table.query().nearest_to_text(q, columns=["content_fts"]).select([*CHUNK_COLUMNS, "vector"])
        return (query.where(where) if where is not None else query).limit(PER_LEG).to_arrow()

    def vector(ef: int) -> Callable[[str, np.ndarray], Any]:
        def run(_q: str, v: np.ndarray) -> Any:
            query = table.query().nearest_to(v).distance_type("cosine").select(list(CHUNK_COLUMNS))
            query = query.limit(PER_LEG).ef(ef).refine_factor(REFINE)
            return (query.where(where) if where is not None else query).to_arrow()

        return run

    out: dict[str, Callable[[str, np.ndarray], Any]] = {"keyword": keyword}
    if has_vector:
        out["vector ef 512"] = vector(EF)
        if where is not None:
            out["vector scaled ef"] = vector(max(PER_LEG * REFINE, math.ceil(EF * share)))
    return out


async def measure(kb: Path, docs: list[int], queries: int, bitmap: bool) -> dict[str, Any]:
    db = await lancedb.connect_async(str(kb))
    tables = {"btree": await db.open_table("chunks")}
    if bitmap:
        tables["bitmap"] = await bitmap_copy(kb)
    everything = [r["id"] for r in await (await db.open_table("document_meta")).query().select(["id"]).to_list()]
    has_vector = any(ix.columns == ["vector"] for ix in await tables["btree"].list_indices())
    words, rng = vocabulary(), np.random.default_rng(3)
    texts = [" ".join(words[i] for i in rng.choice(400, size=rng.integers(2, 6))) for _ in range(queries)]
    sample = await tables["btree"].query().select(["vector"]).limit(20 * queries).to_list()
    vectors = [np.asarray(r["vector"], dtype=np.float32) for r in sample[::20]]
    out: dict[str, Any] = {"chunks": await tables["btree"].count_rows(), "documents": len(everything), "views": []}
    for n in docs:
        visible = everything[:: max(1, len(everything) // n)][:n]  # spread over the table, as a tag would be
        share = len(visible) / len(everything)
        sql, expr = sql_in("document_id", visible), col("document_id").isin(visible)
        variants: dict[str, Callable[[str, np.ndarray], Any]] = {}
        for index, table in tables.items():
            for form, where in (("unfiltered", None), ("sql", sql), ("expr", expr)):
                for leg, run in legs(table, where, share, has_vector).items():
                    variants[f"{leg} {form} ({index})"] = run
            variants[f"plan sql ({index})"] = lambda _q, _v, t=table, s=sql: t.query().where(s).limit(1).explain_plan()
        spent: dict[str, list[float]] = {name: [] for name in variants}
        for i, (q, v) in enumerate(zip(texts, vectors, strict=False)):
            for name, run in variants.items():
                started = time.perf_counter()
                await run(q, v)
                if i:  # the first round warms caches
                    spent[name].append((time.perf_counter() - started) * 1000)
        view = {"visible_docs": len(visible), "share": round(share, 4), "prefilter_chars": len(sql)}
        out["views"].append({**view, "p50_ms": {name: statistics.median(ms) for name, ms in spent.items()}})
        print(f"{len(visible)} documents ({share:.1%}), prefilter {len(sql)} chars; load {machine()['load_1_5_15']}")
        for name, ms in spent.items():
            print(f"  {name:>36} {statistics.median(ms):8.1f} ms")
    return out


async def strategies(kb: Path, docs: list[int], queries: int, ef: int) -> dict[str, Any]:
    """The vector leg under a view three ways (and the full-text leg two), in the form the store sends its
    prefilter (`VisibleDocuments.expression`): HNSW prefiltered at the view's scaled ef (what search does),
    an exact flat scan of the view's rows only (``bypass_vector_index`` under the prefilter), and HNSW
    unfiltered for POST_FILTER_MARGIN x PER_LEG / share rows (as the store fetches them), the hidden ones
    dropped afterwards. Each with its p50, the recall@10 of its first 10 against the exact 10 nearest
    visible chunks, and for the post-filtered legs how many queries kept fewer than PER_LEG rows (the
    store runs such a leg again under the prefilter)."""
    db = await lancedb.connect_async(str(kb))
    table = await db.open_table("chunks")
    everything = [r["id"] for r in await (await db.open_table("document_meta")).query().select(["id"]).to_list()]
    words, rng = vocabulary(), np.random.default_rng(3)
    texts = [" ".join(words[i] for i in rng.choice(400, size=rng.integers(2, 6))) for _ in range(queries)]
    sample = await table.query().select(["vector"]).limit(20 * queries).to_list()
    vectors = [np.asarray(r["vector"], dtype=np.float32) for r in sample[::20]]
    out: dict[str, Any] = {"chunks": await table.count_rows(), "documents": len(everything), "ef": ef, "views": []}
    for n in docs:
        visible = everything[:: max(1, len(everything) // n)][:n]
        view = VisibleDocuments.of(visible, set(everything) - set(visible))
        share = view.share
        variants, exact_10 = _strategy_variants(table, view, ef)
        spent: dict[str, list[float]] = {name: [] for name in variants}
        found: dict[str, list[float]] = {name: [] for name in variants if name.startswith("vector")}
        short: dict[str, int] = {}  # queries whose post-filtered leg kept fewer than PER_LEG rows
        for i, (q, v) in enumerate(zip(texts, vectors, strict=False)):
            exact = None
            if i:
                exact = {r["id"] for r in await exact_10(v)}
            for name, run in variants.items():
                started = time.perf_counter()
                rows = await run(q, v)
                if exact is None:  # the first round warms caches
                    continue
                spent[name].append((time.perf_counter() - started) * 1000)
                if name in found:
                    found[name].append(len({r["id"] for r in rows[:10]} & exact) / 10)
                short[name] = short.get(name, 0) + (len(rows) < PER_LEG)  # the store would run it again
        result: dict[str, Any] = {"visible_docs": len(visible), "share": round(share, 4)}
        result["p50_ms"] = {name: statistics.median(ms) for name, ms in spent.items()}
        result["recall_at_10"] = {name: statistics.mean(r) for name, r in found.items()}
        result["short_queries"] = {name: n for name, n in short.items() if "post-filtered" in name}
        out["views"].append(result)
        print(f"{len(visible)} documents ({share:.1%}, about {round(share * out['chunks'])} chunks)")
        for name, ms in spent.items():
            recall = f"  recall@10 {statistics.mean(found[name]):.3f}" if name in found else ""
            if "post-filtered" in name:
                recall += f"  fewer than {PER_LEG} kept in {short[name]} of {len(ms)}"
            print(f"  {name:>48} {statistics.median(ms):8.1f} ms{recall}")
        print(f"  load {machine()['load_1_5_15']}")
    return out


def _strategy_variants(
    table: Any, view: VisibleDocuments, ef: int
) -> tuple[dict[str, Callable[[str, np.ndarray], Any]], Callable[[np.ndarray], Any]]:
    """`strategies`' variants for one view, and the exact 10 nearest visible chunks of a vector."""
    where, share = view.expression, view.share
    over = math.ceil(PER_LEG * POST_FILTER_MARGIN / share)  # as the store fetches (ViewLegs)

    def nearest(v: np.ndarray, rows: int, leg_ef: int, flat: bool = False, prefilter: bool = True) -> Any:
        query = table.query().nearest_to(v).distance_type("cosine").select(list(CHUNK_COLUMNS)).limit(rows)
        query = query.bypass_vector_index() if flat else query.ef(max(leg_ef, rows * REFINE)).refine_factor(REFINE)
        return query.where(where) if prefilter else query

    def post_filtered(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [r for r in rows if view.passes(r["document_id"])][:PER_LEG]

    scaled = max(PER_LEG * REFINE, math.ceil(ef * share))
    variants: dict[str, Callable[[str, np.ndarray], Any]] = {
        f"vector HNSW prefiltered, ef {scaled}": lambda _q, v: nearest(v, PER_LEG, scaled).to_list(),
        "vector flat scan of the view's rows": lambda _q, v: nearest(v, PER_LEG, 0, flat=True).to_list(),
        "full text prefiltered": lambda q, _v: _fts(table, q, PER_LEG, where).to_list(),
    }
    if share >= 0.01:  # below, tens of thousands of rows per leg: seconds a query
        variants[f"vector HNSW unfiltered {over} rows, post-filtered"] = lambda _q, v: _after(
            nearest(v, over, ef, prefilter=False).to_list(), post_filtered
        )
        variants[f"full text unfiltered {over} rows, post-filtered"] = lambda q, _v: _after(
            _fts(table, q, over, None).to_list(), post_filtered
        )
    return variants, lambda v: nearest(v, 10, 0, flat=True).to_list()


def _fts(table: Any, q: str, rows: int, where: Any) -> Any:
    query = table.query().nearest_to_text(q, columns=["content_fts"]).select([*CHUNK_COLUMNS, "vector"]).limit(rows)
    return query.where(where) if where is not None else query


async def _after(rows: Any, then: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return then(await rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--docs", type=int, nargs="+", default=[50, 500, 5000])
    parser.add_argument("--queries", type=int, default=12)
    parser.add_argument("--bitmap", action="store_true", help="Also on a copy with a Bitmap index on document_id.")
    parser.add_argument("--dir", type=Path, default=Path(__file__).resolve().parent / "results")
    parser.add_argument(
        "--strategies",
        action="store_true",
        help="The vector leg prefiltered / as a flat scan of the view / unfiltered then post-filtered, per view.",
    )
    parser.add_argument("--ef", type=int, default=SearchSettings().ann_ef, help="Unfiltered ef (--strategies).")
    args = parser.parse_args()
    kb = args.dir / f"synthetic-{args.size}.lancedb"
    if not (kb / ".synthetic-complete").exists() and not (kb / "chunks.lance").exists():
        sys.exit(f"{kb} is not built: run bench/search.py --sizes {args.size} first")
    host = machine()
    if args.strategies:
        result = anyio.run(strategies, kb, args.docs, args.queries + 1, args.ef)
    else:
        result = anyio.run(measure, kb, args.docs, args.queries + 1, args.bitmap)
    print(f"{describe()}; load at the start {host['load_1_5_15']}, at the end {machine()['load_1_5_15']}")
    print(json.dumps({"bench": "prefilter", "machine": host, **result}))


if __name__ == "__main__":
    main()
