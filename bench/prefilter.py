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

from mcp_analysis.store.candidates import CHUNK_COLUMNS
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--docs", type=int, nargs="+", default=[50, 500, 5000])
    parser.add_argument("--queries", type=int, default=12)
    parser.add_argument("--bitmap", action="store_true", help="Also on a copy with a Bitmap index on document_id.")
    parser.add_argument("--dir", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args()
    kb = args.dir / f"synthetic-{args.size}.lancedb"
    if not (kb / ".synthetic-complete").exists() and not (kb / "chunks.lance").exists():
        sys.exit(f"{kb} is not built: run bench/search.py --sizes {args.size} first")
    host = machine()
    result = anyio.run(measure, kb, args.docs, args.queries + 1, args.bitmap)
    print(f"{describe()}; load at the start {host['load_1_5_15']}, at the end {machine()['load_1_5_15']}")
    print(json.dumps({"bench": "prefilter", "machine": host, **result}))


if __name__ == "__main__":
    main()
