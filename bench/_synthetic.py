"""Synthetic knowledge bases for benchmarks: real LanceDB tables, real layout, realistic sizes.

Text is drawn from a Zipf-distributed vocabulary in sections of paragraphs. Vectors are
the normalized mean of *real* embeddings of each chunk's words (the vocabulary is
embedded once with the default model), so nearest-neighbour structure resembles real
data while 100k chunks build in about a minute instead of hours of model time.
"""

from __future__ import annotations

import json
import random
import sys
import time
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mcp_analysis.config import load_settings
from mcp_analysis.embed.embedder import create_embedder
from mcp_analysis.store import schema
from mcp_analysis.store.database import Store
from mcp_analysis.store.models import DocumentMeta
from mcp_analysis.store.writes import DocumentRows

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
    "vulnerability",
    "advisory",
    "patch",
    "gateway",
    "controller",
    "survey",
    "operator",
    "port",
    "authority",
    "harbour",
    "berth",
    "pilot",
    "cargo",
    "contract",
    "maintenance",
    "budget",
    "roadmap",
    "engineering",
    "release",
    "audit",
    "compliance",
    "regulation",
    "safety",
    "collision",
    "radar",
    "sensor",
    "network",
    "encryption",
    "certificate",
    "portal",
    "customer",
    "support",
    "incident",
    "report",
    "finding",
    "recommendation",
    "analysis",
    "forecast",
    "backlog",
    "delivery",
    "production",
    "assembly",
    "supplier",
    "cost",
    "freight",
    "panel",
    "display",
    "chart",
    "compression",
    "bandwidth",
    "subscription",
    "dashboard",
    "training",
    "crew",
    "bridge",
    "engine",
    "fuel",
    "efficiency",
    "emission",
    "weather",
    "route",
    "schedule",
    "dock",
    "crane",
    "container",
    "terminal",
    "customs",
]


def vocabulary(size: int = 3000, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    extra = {"".join(rng.choice("abcdefghijklmnoprstuvw") for _ in range(rng.randint(4, 10))) for _ in range(size)}
    return WORDS + sorted(extra)[: size - len(WORDS)]


async def word_vectors(words: list[str]) -> np.ndarray:
    return await create_embedder("onnx:all-MiniLM-L6-v2").embed_documents(words)


def _text(rng: np.random.Generator, words: list[str], weights: np.ndarray, n: int) -> tuple[str, np.ndarray]:
    idx = rng.choice(len(words), size=n, p=weights)
    return " ".join(words[i] for i in idx), idx


def documents(
    vectors: np.ndarray, words: list[str], docs: range, chunks_per_doc: int, seed: int
) -> Iterator[DocumentRows]:
    """The synthetic documents numbered `docs` (their chunks' vectors built from `vectors`)."""
    ranks = np.arange(1, len(words) + 1)
    weights = (1 / ranks**1.05) / (1 / ranks**1.05).sum()
    rng = np.random.default_rng(seed)
    for d in docs:
        yield _document(d, rng, words, weights, vectors, chunks_per_doc)


def _document(
    d: int, rng: np.random.Generator, words: list[str], weights: np.ndarray, vectors: np.ndarray, chunks_per_doc: int
) -> DocumentRows:
    doc_id = str(uuid.uuid4())
    items, chunk_rows, content = [], [], []
    position = 0
    for c in range(chunks_per_doc):
        heading = f"Section {c + 1}"
        section_start = position
        items.append(_item(doc_id, position, "section_header", heading, c // 4 + 1, 1))
        position += 1
        paragraphs = []
        ids = []
        for _ in range(2):
            text, idx = _text(rng, words, weights, 100)
            paragraphs.append(text)
            ids.append(idx)
            items.append(_item(doc_id, position, "text", text, c // 4 + 1, None))
            position += 1
        chunk_id = str(uuid.uuid4())
        for item in items[section_start:position]:
            item["chunk_ids"] = [chunk_id]
        vector = vectors[np.concatenate(ids)].mean(axis=0)
        vector /= np.linalg.norm(vector)
        body = "\n\n".join(paragraphs)
        chunk_rows.append(
            {
                "id": chunk_id,
                "document_id": doc_id,
                "content": f"{heading}\n\n{body}",
                "content_fts": f"Document {d}\n{heading}\n\n{body}",
                "metadata": json.dumps(
                    {
                        "headings": [f"Document {d}", heading],
                        "doc_item_refs": [i["self_ref"] for i in items[section_start:position]],
                        "labels": ["section_header", "text"],
                        "page_numbers": [c // 4 + 1],
                        "picture_refs": [],
                        "item_range": [section_start, position - 1],
                        "section_range": [section_start, position - 1],
                    }
                ),
                "order": c,
                "vector": vector.astype(np.float32).tolist(),
            }
        )
        content.append(f"## {heading}\n\n{body}")
    text = "\n\n".join(content)
    meta = DocumentMeta(
        id=doc_id,
        uri=f"synthetic://doc/{d:06d}",
        title=f"Document {d}",
        metadata={"group": d % 10},
        created_at="2026-01-01T00:00:00+00:00",
        updated_at="2026-01-01T00:00:00+00:00",
        content_hash=str(d),
        content_size=len(text),
    )
    return DocumentRows(meta, {"id": doc_id, "content": text, "docling_document": b""}, items, chunk_rows)


def _item(doc_id: str, position: int, label: str, text: str, page: int, level: int | None) -> dict[str, Any]:
    return {
        "document_id": doc_id,
        "position": position,
        "self_ref": f"#/texts/{position}",
        "label": label,
        "text": text,
        "page_numbers": [page],
        "heading_level": schema.NO_HEADING_LEVEL if level is None else level,  # as store/rows.py writes it
        "picture_data": None,
        "chunk_ids": [],
    }


async def write(store: Store, rows: Iterable[DocumentRows], batch_docs: int = 250) -> None:
    batch: list[DocumentRows] = []
    for document in rows:
        batch.append(document)
        if len(batch) >= batch_docs:
            await store.write_documents(batch)
            batch = []
    if batch:
        await store.write_documents(batch)


async def build(path: Path, chunks: int, chunks_per_doc: int = 20, seed: int = 1) -> Path:
    """A knowledge base with `chunks` chunks of ~200 words (skipped when it already exists).

    A folder without the completion marker is never removed here: it may be an interrupted build,
    or one another process is still indexing (a 1M build takes an hour on 2 shared cores)."""
    marker = path / ".synthetic-complete"
    if marker.exists():
        return path
    if path.exists():
        sys.exit(
            f"{path} exists but its build did not complete: another process may still be building or indexing "
            "it. Remove it to build it again, or point --dir elsewhere."
        )
    started = time.perf_counter()
    words = vocabulary()
    vectors = await word_vectors(words)
    store = await Store.open(path, create=True)
    await store.initialize("onnx:all-MiniLM-L6-v2", 384)
    await write(store, documents(vectors, words, range(chunks // chunks_per_doc), chunks_per_doc, seed))
    written = time.perf_counter()
    await store.ensure_indexes(load_settings().search.vector_index_min_rows)
    await store.optimize()
    store.close()
    marker.write_text(
        f"{chunks} chunks in {time.perf_counter() - started:.1f} s "
        f"(indexes and optimize {time.perf_counter() - written:.1f} s)\n"
    )
    return path


def settings_for(path: Path, **overrides: object) -> object:
    return load_settings(db=path, **overrides)
