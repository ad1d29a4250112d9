"""What the items table's ``heading_level`` costs the search's windowed items read, per way of writing it.

The expansion reads a few documents' position windows of ``document_items`` (`StoreReads.item_windows`,
the columns of `search/expand.py`). At a million chunks that read took about twice as long with
``heading_level`` as without it (docs/benchmarks.md, "Search at a million chunks"). This script checks
whether the way the column is written decides that. In a temporary directory it writes, per variant, a
``document_items`` table shaped like ours (the product's schema; documents of ~60 items, positions
0..k-1, ~100-character texts, ``section_header`` items at --heading-share, 5 %, plus each document's
first: 6.7 %), created by LanceDB like a knowledge base's and filled as one fragment (one data file, as
after `optimize` compacts it), with the product's bitmap index on ``document_id``. The variants differ
only in ``heading_level``:

    a  null for non-headings, 1 for every heading (what ingest writes when headings have one level)
    b  null for non-headings, levels 1-3 mixed
    c  0 for non-headings, 1 for headings (no nulls, the field still nullable)
    d  as c, the field declared non-nullable

Each variant then runs the same --queries windowed reads (after --warmup unmeasured ones) with the
product's ``where`` (`item_windows`: ``document_id IN (...) AND (ranges)``) through LanceDB's async
API, with and without ``heading_level``, alternating which goes first; it prints p50 of each, their
ratio, the table's size on disk, and how the data file stores ``heading_level`` (page layout, bytes).

    .venv/bin/python bench/heading_level_encoding.py                      # 2,000,000 rows
    .venv/bin/python bench/heading_level_encoding.py --rows 200000 --variants a,c
    flock /work/scratch/heavy.lock nice -n 5 .venv/bin/python bench/heading_level_encoding.py
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lance
import lancedb
import pyarrow as pa
from _machine import describe, machine
from lance.file import LanceFileReader
from lancedb.index import Bitmap

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mcp_analysis.store import schema
from mcp_analysis.store.filters import sql_in, sql_quote
from mcp_analysis.store.reads import coalesced

COLUMNS = ["document_id", "position", "self_ref", "label", "text", "page_numbers", "heading_level"]
WITHOUT = [c for c in COLUMNS if c != "heading_level"]
VARIANTS = {
    "a": "null / 1 (one level, today's write)",
    "b": "null / 1-3 (mixed levels)",
    "c": "0 / 1 (no nulls, nullable field)",
    "d": "0 / 1, non-nullable field",
}
WINDOW = 40  # search/expand.py's items on each side of a hit
BATCH = 50_000
WORDS = [
    "revenue",
    "quarter",
    "growth",
    "margin",
    "vessel",
    "fleet",
    "navigation",
    "telemetry",
    "firmware",
    "security",
    "advisory",
    "patch",
]


def items_schema(variant: str) -> pa.Schema:
    field = pa.field("heading_level", pa.int32(), nullable=variant != "d")
    index = schema.DOCUMENT_ITEMS_SCHEMA.get_field_index("heading_level")
    return schema.DOCUMENT_ITEMS_SCHEMA.set(index, field)


def level(variant: str, heading: bool, rnd: random.Random) -> int | None:
    if variant in ("a", "b") and not heading:
        return None
    if not heading:
        return 0
    return rnd.randint(1, 3) if variant == "b" else 1


def batches(rows: int, variant: str, heading_share: float, table_schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """The same documents for every variant (one seed); only ``heading_level`` follows `variant`."""
    rnd = random.Random(7)
    levels = random.Random(11)
    written, doc = 0, 0
    cols: dict[str, list[Any]] = {name: [] for name in table_schema.names}
    while written < rows:
        size = min(rows - written, rnd.randint(40, 80))
        doc_id = f"doc-{doc:07d}"
        for position in range(size):
            heading = position == 0 or rnd.random() < heading_share
            cols["document_id"].append(doc_id)
            cols["position"].append(position)
            cols["self_ref"].append(f"#/texts/{position}")
            cols["label"].append("section_header" if heading else "text")
            cols["text"].append(" ".join(rnd.choice(WORDS) for _ in range(12))[:100])
            cols["page_numbers"].append([1 + position // 20])
            cols["heading_level"].append(level(variant, heading, levels))
            cols["picture_data"].append(None)
            cols["chunk_ids"].append([f"{doc_id}-c{position // 8}"])
        written, doc = written + size, doc + 1
        if len(cols["document_id"]) >= BATCH or written >= rows:
            yield pa.RecordBatch.from_pydict(cols, schema=table_schema)
            cols = {name: [] for name in table_schema.names}


async def build(root: Path, variant: str, rows: int, heading_share: float) -> tuple[Any, int, int]:
    """The variant's table as one fragment with the bitmap index; (table, documents, bytes on disk)."""
    uri = root / f"kb-{variant}.lancedb"
    db = await lancedb.connect_async(str(uri))
    table_schema = items_schema(variant)
    table = await db.create_table(schema.DOCUMENT_ITEMS, schema=table_schema)  # as the store creates it
    reader = pa.RecordBatchReader.from_batches(table_schema, batches(rows, variant, heading_share, table_schema))
    lance.write_dataset(reader, str(uri / f"{schema.DOCUMENT_ITEMS}.lance"), mode="append", max_rows_per_file=rows)
    await table.checkout_latest()
    await table.create_index("document_id", config=Bitmap(), replace=True)
    documents = len(set((await table.query().select(["document_id"]).to_arrow()).column(0).to_pylist()))
    size = sum(p.stat().st_size for p in uri.rglob("*") if p.is_file())
    return table, documents, size


def windows_where(documents: int, rnd: random.Random, per_query: int) -> str:
    """`item_windows`' filter for `per_query` documents, one or two hit windows each (positions < 40)."""
    ranges: list[str] = []
    ids = [f"doc-{d:07d}" for d in rnd.sample(range(documents), per_query)]
    for doc_id in ids:
        spans = []
        for _ in range(rnd.randint(1, 2)):
            hit = rnd.randint(0, 39)
            spans.append((max(0, hit - WINDOW), hit + 2 + WINDOW))
        ranges += [
            f"(document_id = {sql_quote(doc_id)} AND position >= {lo} AND position <= {hi})"
            for lo, hi in coalesced(spans)
        ]
    return f"{sql_in('document_id', ids)} AND ({' OR '.join(ranges)})"


async def timed(table: Any, where: str, columns: list[str]) -> float:
    started = time.perf_counter()
    await table.query().where(where).select(columns).to_list()  # as `StoreReads.items` reads
    return (time.perf_counter() - started) * 1000


def heading_pages(path: Path) -> str:
    """How the data file stores ``heading_level``: each page's layout and buffer bytes."""
    (fragment,) = lance.dataset(str(path)).get_fragments()
    (data_file,) = fragment.data_files()
    meta = LanceFileReader(str(path / "data" / data_file.path)).metadata()
    column = meta.columns[schema.DOCUMENT_ITEMS_SCHEMA.names.index("heading_level")]  # one leaf per field here
    pages = []
    for page in column.pages:
        layout = re.search(r"(\w+)Layout\(", page.encoding)
        pages.append(f"{layout.group(1) if layout else '?'} {sum(b.size for b in page.buffers) / 1e3:.0f} KB")
    return f"{len(pages)} page(s): " + ", ".join(sorted(set(pages)))


async def measure(table: Any, path: Path, documents: int, args: argparse.Namespace) -> dict[str, float]:
    rnd = random.Random(3)  # the same queries for every variant
    wheres = [windows_where(documents, rnd, args.documents) for _ in range(args.warmup + args.queries)]
    with_ms: list[float] = []
    without_ms: list[float] = []
    for i, where in enumerate(wheres):
        order = [(COLUMNS, with_ms), (WITHOUT, without_ms)]
        for columns, out in order if i % 2 else order[::-1]:
            ms = await timed(table, where, columns)
            if i >= args.warmup:
                out.append(ms)
    p50_with, p50_without = statistics.median(with_ms), statistics.median(without_ms)
    return {
        "p50_with_ms": round(p50_with, 2),
        "p50_without_ms": round(p50_without, 2),
        "ratio": round(p50_with / p50_without, 2),
        "heading_level_pages": heading_pages(path),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--variants", default="a,b,c,d")
    parser.add_argument("--heading-share", type=float, default=0.05, help="share of section_header items")
    parser.add_argument("--documents", type=int, default=4, help="documents per read")
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=10)
    args = parser.parse_args()
    print(describe(), "load (1/5/15 min):", machine()["load_1_5_15"], flush=True)
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="heading-level-") as tmp:
        for variant in args.variants.split(","):
            started = time.perf_counter()
            table, documents, size = await build(Path(tmp), variant, args.rows, args.heading_share)
            path = Path(tmp) / f"kb-{variant}.lancedb" / f"{schema.DOCUMENT_ITEMS}.lance"
            fragments = len(lance.dataset(str(path)).get_fragments())
            built = time.perf_counter() - started
            results[variant] = {"size_mb": round(size / 1e6, 1), "fragments": fragments, "documents": documents}
            results[variant] |= await measure(table, path, documents, args)
            print(f"variant {variant} built in {built:.0f} s: {json.dumps(results[variant])}", flush=True)
    print(f"\n{args.rows:,} rows, {args.queries} reads of {args.documents} documents' windows (p50, ms)")
    print(f"{'variant':<42} {'with':>7} {'without':>8} {'ratio':>6} {'MB on disk':>11}")
    for variant, r in results.items():
        print(
            f"{variant} {VARIANTS[variant]:<40} {r['p50_with_ms']:>7.2f} {r['p50_without_ms']:>8.2f}"
            f" {r['ratio']:>6.2f} {r['size_mb']:>11.1f}"
        )
    for variant, r in results.items():
        print(f"{variant}: heading_level stored as {r['heading_level_pages']}")
    print("load after (1/5/15 min):", machine()["load_1_5_15"])


if __name__ == "__main__":
    asyncio.run(main())
