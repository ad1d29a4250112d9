"""What building a document's rows costs, up to the Arrow table the store writes (store/rows.py).

One synthetic document of `--chunks` chunks with 384-dim float32 vectors (the bundled
embedder's), built by `store.rows.document_rows` and converted to the chunks table's Arrow
schema as a local add's write and a Ray actor's fragments do. "lists": the same rows with each
vector a Python list of floats (how rows were built before); "arrays": as the builder hands them
over (a float32 view of the batch's matrix each). Best and worst of `--rounds`.

    python bench/rows.py [--chunks 2000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pyarrow as pa
from _machine import describe, machine

from mcp_analysis.ingest.chunker import ChunkDraft
from mcp_analysis.store import rows, schema
from mcp_analysis.store.models import DocumentMeta

DIMENSION = 384


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    host = machine()
    meta = DocumentMeta(id="doc", uri="file:///doc.md", title="doc", metadata={}, created_at="", updated_at="")
    text = "A paragraph of a manual, about as long as a chunk is. " * 20
    chunks = [
        ChunkDraft(i, text, ["Section"], [], ["text"], [], [], (i, i), (0, args.chunks)) for i in range(args.chunks)
    ]
    vectors = np.random.default_rng(0).random((args.chunks, DIMENSION), dtype=np.float32)
    table_schema = schema.chunks_schema(DIMENSION)
    times: dict[str, list[float]] = {"lists": [], "arrays": []}
    for _ in range(args.rounds):
        for kind in times:
            started = time.perf_counter()
            built = rows.document_rows(meta, "", b"", [], chunks, [], vectors).chunks
            for row in built if kind == "lists" else ():
                row["vector"] = row["vector"].tolist()
            pa.Table.from_pylist(built, schema=table_schema)
            times[kind].append((time.perf_counter() - started) * 1000)
    for kind, values in times.items():
        print(f"{kind:>6}: {min(values):.0f}-{max(values):.0f} ms for {args.chunks} chunks ({args.rounds} rounds)")
    print(f"{describe()}; load at the start {host['load_1_5_15']}, at the end {machine()['load_1_5_15']}")


if __name__ == "__main__":
    main()
