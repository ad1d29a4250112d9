"""What a vector leg under an allowlist costs, by the allowlist's size (bench/view_split.py: by part).

A filtered view's vector leg runs through Lance's scanner under the view's chunk row ids
(`store/lance_legs.py`). This times that leg on a cached synthetic knowledge base (bench/search.py
builds them) unfiltered and under allowlists of random chunks of several sizes, up to all of them,
at two HNSW breadths with no exact re-rank and only the id column, so what differs between the rows
is the allowlist alone. Medians in ms over the queries, the first three warming caches.

    python bench/allowlist_sizes.py [--dir bench/results] [--size 1000000] [--queries 25]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import describe, machine
from _synthetic import settings_for, vocabulary

from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.store import schema

SHARES = (0.003, 0.03, 0.1, 1.0)
BREADTHS = (50, 200)
WARM = 3


async def measure(path: Path, queries: int) -> dict[str, Any]:
    from lance.dataset import serialize_row_addrs

    words, rng = vocabulary(), np.random.default_rng(3)
    texts = [" ".join(words[i] for i in rng.choice(400, size=rng.integers(2, 6))) for _ in range(queries)]
    kb = await KnowledgeBase.open(settings_for(path))
    embedder = await kb.embedder()
    legs = await kb.store.scanner_legs(0)
    assert legs is not None, "pylance's scanner is not available"
    version = await kb.store.table(schema.CHUNKS).version()
    rows = legs.dataset(version).to_table(columns=[], with_row_id=True).column("_rowid").to_numpy()
    units = [v / np.linalg.norm(v) for v in [await embedder.embed_query(t) for t in texts]]

    def p50(run: Callable[[np.ndarray], Any]) -> float:
        spent = []
        for unit in units:
            started = time.perf_counter()
            run(unit)
            spent.append((time.perf_counter() - started) * 1000)
        return statistics.median(spent[WARM:])

    out: dict[str, Any] = {"chunks": len(rows), "unfiltered": {}, "allowlists": []}
    for ef in BREADTHS:
        out["unfiltered"][ef] = p50(lambda u, ef=ef: legs.vector(version, u, ["id"], 50, None, ef=ef, refine_factor=1))
    for share in SHARES:
        chosen = rows if share >= 1 else np.sort(rng.choice(rows, size=int(len(rows) * share), replace=False))
        allowed = serialize_row_addrs(chosen.tolist())
        cell = {"rows": len(chosen), "bytes": len(allowed)}
        for ef in BREADTHS:
            cell[ef] = p50(lambda u, ef=ef, a=allowed: legs.vector(version, u, ["id"], 50, a, ef=ef, refine_factor=1))
        out["allowlists"].append(cell)
    await kb.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", type=Path, default=Path(__file__).resolve().parent / "results")
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=25)
    args = parser.parse_args()
    path = args.dir / f"synthetic-{args.size}.lancedb"
    if not path.exists():
        sys.exit(f"{path} does not exist: build it first with bench/search.py --sizes {args.size}")
    result = anyio.run(measure, path, args.queries)
    print(f"vector leg, 50 rows, refine 1, id column only; {result['chunks']} chunks; p50 ms")
    print(f"{'allowlist':>24} " + " ".join(f"{'ef ' + str(ef):>8}" for ef in BREADTHS))
    print(f"{'none (unfiltered)':>24} " + " ".join(f"{result['unfiltered'][ef]:>8.1f}" for ef in BREADTHS))
    for cell in result["allowlists"]:
        label = f"{cell['rows']} rows ({cell['bytes'] // 1024} KiB)"
        print(f"{label:>24} " + " ".join(f"{cell[ef]:>8.1f}" for ef in BREADTHS))
    print(f"{describe()}; load at the end {machine()['load_1_5_15']}")
    print(json.dumps({"bench": "allowlist_sizes", "machine": machine(), **result}))


if __name__ == "__main__":
    main()
