"""Agreement of our offline query vectors with a haiku.rag database's stored vectors.

haiku.rag 0.101.1 embedded each chunk's `content_fts` (headings + content) with
sentence-transformers all-MiniLM-L6-v2 (torch, fp32). We re-embed those same texts
with our ONNX MiniLM (the default int8 variant and the fp32 `-exact` one) and
compare, per chunk:
- cosine(ours, stored);
- self-retrieval: is the chunk's own stored vector the nearest stored vector to
  our re-embedding (top-1), and among the top 5?

    python bench/haiku_vectors.py [--db tests/fixtures/haiku_rag_db_0.101.1]

The database is copied to a temporary directory first and never written.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import anyio
import lancedb
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _machine import describe, machine

from mcp_analysis.embed.embedder import create_embedder

FIXTURE = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "haiku_rag_db_0.101.1"


async def stored_chunks(db_path: Path) -> tuple[list[str], np.ndarray]:
    db = await lancedb.connect_async(str(db_path))
    rows = await (await db.open_table("chunks")).query().select(["id", "content_fts", "vector"]).to_list()
    rows.sort(key=lambda r: r["id"])
    return [r["content_fts"] for r in rows], np.asarray([r["vector"] for r in rows], dtype=np.float32)


def agreement(ours: np.ndarray, stored: np.ndarray) -> dict[str, float]:
    ours = ours / np.linalg.norm(ours, axis=1, keepdims=True)
    stored = stored / np.linalg.norm(stored, axis=1, keepdims=True)
    cosines = np.sum(ours * stored, axis=1)
    ranks = np.argsort(-(ours @ stored.T), axis=1)
    own = np.arange(len(ours))
    return {
        "cos_mean": float(cosines.mean()),
        "cos_min": float(cosines.min()),
        "cos_p05": float(np.quantile(cosines, 0.05)),
        "top1": float(np.mean(ranks[:, 0] == own)),
        "top5": float(np.mean([own[i] in ranks[i, :5] for i in own])),
    }


async def main(db: Path) -> None:
    host = machine()
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "db"
        shutil.copytree(db, copy)
        texts, stored = await stored_chunks(copy)
    results: dict[str, dict[str, float]] = {}
    for name in ("onnx:all-MiniLM-L6-v2", "onnx:all-MiniLM-L6-v2-exact"):
        embedder = create_embedder(name)
        embedder.warm_up()
        started = time.perf_counter()
        ours = await embedder.embed_documents(texts)
        figures = agreement(ours, stored)
        figures["seconds"] = time.perf_counter() - started
        results[name] = figures
    print(f"{len(texts)} chunks of {db.name}; stored vectors: sentence-transformers all-MiniLM-L6-v2 (fp32)")
    print(f"{'embedder':32} {'cos mean':>9} {'cos p05':>8} {'cos min':>8} {'top-1':>6} {'top-5':>6} {'s':>6}")
    for name, f in results.items():
        print(
            f"{name:32} {f['cos_mean']:9.5f} {f['cos_p05']:8.5f} {f['cos_min']:8.5f} "
            f"{f['top1']:6.3f} {f['top5']:6.3f} {f['seconds']:6.1f}"
        )
    print(f"{describe()}; load at the end {machine()['load_1_5_15']}")
    print(json.dumps({"bench": "haiku_vectors", "machine": host, "chunks": len(texts), **results}))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, default=FIXTURE)
    anyio.run(main, parser.parse_args().db)
