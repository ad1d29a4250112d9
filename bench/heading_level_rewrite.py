"""Hard-linked copies of the synthetic knowledge bases whose items table is written again, for
`bench/search.py` to time the one difference: how `heading_level` is stored.

The knowledge bases in bench/results were built when an item without a heading level was stored as
null; the store now writes `schema.NO_HEADING_LEVEL` (store/rows.py), which Lance keeps in
mini-blocks instead of a constant with a validity buffer over the whole data file
(bench/heading_level_encoding.py). Rebuilding a 1M-chunk knowledge base takes a quarter of an hour,
so this writes only the items table again, in the order it is stored (each document's items
together), in two copies: `control` with its values as they are, `zero` with nulls as 0. Both copies
are written by the same call, so they differ only in that column; every other table is a hard link
to the source's files (never modified: LanceDB writes new files and versions).

    python bench/heading_level_rewrite.py --source bench/results/rebuild --out /tmp/hl
    python bench/search.py --dir /tmp/hl/control --sizes 100000 1000000 --skip maintenance --index-builds-up-to 0
    python bench/search.py --dir /tmp/hl/zero --sizes 100000 1000000 --skip maintenance --index-builds-up-to 0
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import time
from pathlib import Path

import lancedb
import pyarrow.compute as pc
from lancedb.index import Bitmap

from mcp_analysis.store import schema


async def rewrite(source: Path, out: Path, sizes: list[int]) -> None:
    for variant in ("control", "zero"):
        (out / variant).mkdir(parents=True, exist_ok=True)
        for size in sizes:
            copy = out / variant / f"synthetic-{size}.lancedb"
            if not copy.exists():  # hard links: the source's files are shared, never written
                original = (source / f"synthetic-{size}.lancedb").resolve()
                await asyncio.to_thread(subprocess.run, ["cp", "-al", str(original), str(copy)], check=True)
            started = time.monotonic()
            db = await lancedb.connect_async(copy)
            data = await (await db.open_table(schema.DOCUMENT_ITEMS)).query().to_arrow()
            if variant == "zero":
                at = data.schema.get_field_index("heading_level")
                filled = pc.fill_null(data.column(at), schema.NO_HEADING_LEVEL)
                data = data.set_column(at, data.schema.field(at), filled)
            table = await db.create_table(schema.DOCUMENT_ITEMS, data, mode="overwrite")
            await table.create_index("document_id", config=Bitmap())  # as the store indexes it
            nulls = data.column("heading_level").null_count
            took = time.monotonic() - started
            print(f"{variant} {size}: {data.num_rows:,} items, {nulls:,} null levels, {took:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", type=Path, default=Path("bench/results/rebuild"))
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    args = parser.parse_args()
    asyncio.run(rewrite(args.source, args.out, args.sizes))


if __name__ == "__main__":
    main()
