"""What stays serial in `add --ray` (the driver's own steps), measured at 20k and 200k chunks.

A synthetic write path that skips conversion and embedding (they run on the cluster and scale with
it): the driver's steps are timed through the real code on a real knowledge base on disk:

- listing: `collect_sources` over a folder of `chunks / chunks-per-file` small files;
- commit: the job's one commit at its end, the store's `commit_fragments` (each content table's
  fragments appended in one commit, then the job's one commit point), the fragments written
  beforehand batch by batch (`ingest.batch_documents` documents) by `write_fragments` in this
  process (on a cluster, the actors write them: that time is reported apart, as `fragment
  writing`, parallel work);
- indexing: the pipeline's index update at the end (`ensure_indexes` + `optimize`), the vector
  index included past `search.vector_index_min_rows` (nothing is committed before the end, so
  there is nothing to index earlier).

Rows are those of documents of `--chunks-per-file` chunks (~256-token texts, random unit vectors
of 384 dimensions, one item per chunk plus a title). Peak RSS of this process is reported too.

    python bench/ray_serial.py [--chunks 20000,200000] [--runs 1] [--chunks-per-file 10]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _machine import describe, machine  # noqa: E402

from mcp_analysis.config import load_settings  # noqa: E402
from mcp_analysis.ingest.excluded import Excluded  # noqa: E402
from mcp_analysis.ingest.sources import collect_sources  # noqa: E402
from mcp_analysis.store.database import Store  # noqa: E402
from mcp_analysis.store.fragments import write_fragments  # noqa: E402
from mcp_analysis.store.models import DocumentMeta  # noqa: E402
from mcp_analysis.store.writes import DocumentRows  # noqa: E402

DIMENSION = 384
TEXT = " ".join(["harbour crane berth pilot inspection gearbox ferry schedule"] * 28)  # ~256 tokens


def document(n: int, chunks: int, rng: np.random.Generator) -> DocumentRows:
    doc_id = str(uuid.uuid4())
    vectors = rng.standard_normal((chunks, DIMENSION)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    chunk_rows, item_rows = [], []
    for k in range(chunks):
        chunk_id = str(uuid.uuid4())
        chunk_rows.append(
            {
                "id": chunk_id,
                "document_id": doc_id,
                "content": f"Section {k}. {TEXT}",
                "content_fts": f"Section {k}. {TEXT}",
                "metadata": "{}",
                "order": k,
                "vector": vectors[k].tolist(),
            }
        )
        item_rows.append(
            {
                "document_id": doc_id,
                "position": k + 1,
                "self_ref": f"#/texts/{k + 1}",
                "label": "text",
                "text": TEXT,
                "page_numbers": [],
                "heading_level": None,
                "picture_data": None,
                "chunk_ids": [chunk_id],
            }
        )
    uri = f"file:///synthetic/doc-{n:06d}.md"
    meta = DocumentMeta(id=doc_id, uri=uri, title=f"Document {n}", created_at="2026-12-01", updated_at="2026-12-01")
    content = "\n\n".join(c["content"] for c in chunk_rows)
    return DocumentRows(meta, {"id": doc_id, "content": content, "docling_document": b"{}"}, item_rows, chunk_rows)


async def serial_steps(db: Path, chunks: int, per_file: int, batch_documents: int, min_rows: int) -> dict[str, Any]:
    rng = np.random.default_rng(7)
    store = await Store.open(db, create=True)
    await store.initialize("synthetic", DIMENSION)
    files = chunks // per_file
    writing = 0.0
    targets = await store.fragment_targets()
    fragments: dict[str, list[Any]] = {}
    metas = []
    for start in range(0, files, batch_documents):
        batch = [document(n, per_file, rng) for n in range(start, min(files, start + batch_documents))]
        began = time.monotonic()
        for table, written in write_fragments(batch, targets).items():
            fragments.setdefault(table, []).extend(written)
        writing += time.monotonic() - began
        metas.extend(b.meta for b in batch)
    began = time.monotonic()
    await store.commit_fragments(metas, fragments, targets)
    commit = time.monotonic() - began
    began = time.monotonic()
    await store.ensure_indexes(min_rows)
    await store.optimize()
    indexing = time.monotonic() - began
    store.close()
    return {
        "commit_s": commit,
        "fragment_writing_s": writing,
        "indexing_s": indexing,
        "batches": -(-files // batch_documents),
    }


def listing_seconds(folder: Path, files: int) -> float:
    folder.mkdir()
    for n in range(files):
        (folder / f"doc-{n:06d}.md").write_text("# A document\n")
    began = time.monotonic()
    found, _ = collect_sources([folder], Excluded(), "/nonexistent.lancedb")
    seconds = time.monotonic() - began
    assert len(found) == files
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", default="20000,200000")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--chunks-per-file", type=int, default=10)
    args = parser.parse_args()
    settings = load_settings()
    batch_documents = settings.ingest.batch_documents
    min_rows = settings.search.vector_index_min_rows
    print(describe(), file=sys.stderr)
    results = []
    for size in (int(c) for c in args.chunks.split(",")):
        for run in range(args.runs):
            work = Path(tempfile.mkdtemp(prefix="ray-serial-"))
            try:
                listed = listing_seconds(work / "docs", size // args.chunks_per_file)
                steps = anyio.run(
                    serial_steps, work / "kb.lancedb", size, args.chunks_per_file, batch_documents, min_rows
                )
            finally:
                shutil.rmtree(work, ignore_errors=True)
            serial = listed + steps["commit_s"] + steps["indexing_s"]
            row = {
                "chunks": size,
                "run": run + 1,
                "listing_s": round(listed, 2),
                **{k: round(v, 2) if isinstance(v, float) else v for k, v in steps.items()},
                "serial_ms_per_chunk": round(1000 * serial / size, 3),
                "peak_rss_mb": round(psutil.Process().memory_info().rss / 2**20),
                "machine": machine(),
            }
            print(json.dumps(row), flush=True)
            results.append(row)


if __name__ == "__main__":
    main()
