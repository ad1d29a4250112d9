"""Does the passage a search result shows hold the answer, for questions asked in other words?

One knowledge base, built by this tree's code from 36 documents Debian ships (the licence texts in
/usr/share/common-licenses, the libffi manual, four READMEs, users-and-groups.html), copied from
the paths in bench/data/passages_queries.json and sha256-checked. Two stdio servers on it, queried
in the same run:

- "rrf": `search.rerank=false`, the previous behaviour (reciprocal-rank fusion, hits of one document
  merged when their grown passages touch, excerpts placed by the query's words around one anchor);
- "rerank": the default (fused vector, keyword and title scores; separate passages; excerpts placed
  on the best-scoring anchors; the hits share `context` x hits characters, the best-ranked get more).

For each query set (easy: shares the documents' words; hard tune / hard held-out: paraphrased,
detail-seeking, near-duplicate documents; with --context45 also the 45 queries of bench/context.py
over 51 manuals, on a second knowledge base): hit@5 and MRR@5 by document, answer@5 (the text the
model is shown for a relevant hit contains the answer phrase) and the median characters of a
search result's text (and WordPiece tokens). Then answer@5 against the `context` argument (the size curve), search p50
over interleaved calls (several rounds) and each server's RSS at the end.

    python bench/passages.py [--rounds 3] [--context45] [--rebuild] [--out bench/results]

Targets: hard answer@5 >= 0.85 with median result text <= 6,000 characters; hit@5 and MRR not
lower than rrf's; easy answer@5 >= 0.96; search p50 at most 1.3x rrf's.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import statistics
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import psutil
from _machine import describe, machine
from context import build_kb, contains_answer, document_names, hit_blocks, side_env, text_of, write_corpus
from mcp import Client, StdioServerParameters

from mcp_analysis.embed.onnx_model import load_tokenizer

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "bench" / "data" / "passages_queries.json"
CONTEXT45 = ROOT / "bench" / "data" / "context_queries.json"
SIDES = {"rrf": "false", "rerank": "true"}
CONTEXTS = (300, 600, 900, 1200, 2000, 4000)
# Result size in tokens too, counted by the bundled WordPiece tokenizer (no truncation): a proxy for
# the host model's tokenizer, which ships in no PyPI package usable offline.
TOKENIZER = load_tokenizer(max_tokens=10**7)


def copy_corpus(spec: dict[str, Any], target: Path) -> str:
    """Copy the documents from where Debian installs them; a digest of their contents."""
    target.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    for doc in spec["documents"]:
        source = Path(doc["path"])
        if not source.exists():
            raise SystemExit(f"{source} is missing: install the Debian package {doc['package']} ({doc['version']})")
        data = source.read_bytes()
        if hashlib.sha256(data).hexdigest() != doc["sha256"]:
            print(f"warning: {source} differs from the labelled version {doc['version']}", file=sys.stderr)
        digest.update(doc["name"].encode() + hashlib.sha256(data).digest())
        if not (target / doc["name"]).exists() or (target / doc["name"]).read_bytes() != data:
            shutil.copyfile(source, target / doc["name"])
    return digest.hexdigest()[:16]


@contextlib.asynccontextmanager
async def server(db: Path, work: Path, rerank: str) -> AsyncIterator[tuple[Client, psutil.Process]]:
    env = {**side_env(ROOT, work), "MCP_ANALYSIS_SEARCH__RERANK": rerank}
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "mcp_analysis", "--db", str(db), "serve"], env=env, cwd=str(ROOT)
    )
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    async with Client(params) as client:
        await client.list_tools()
        started = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
        yield client, next(p for p in started if "serve" in p.cmdline())


async def search(client: Client, query: str, context: int) -> Any:
    result = await client.call_tool("search", {"query": query, "limit": 5, "context": context})
    if result.is_error:
        raise RuntimeError(f"search({query!r}) failed: {text_of(result)[:300]}")
    return result


async def score(client: Client, queries: list[dict[str, Any]], names: dict[str, str], context: int) -> dict[str, float]:
    """hit@5 and MRR@5 by document, answer@5 in the shown text, median result text size."""
    hit = shown = 0
    reciprocal, sizes, tokens = [], [], []
    for query in queries:
        result = await search(client, query["q"], context)
        text = text_of(result)
        hits = result.structured_content["results"]
        ranks = [i for i, h in enumerate(hits, start=1) if names.get(h["document_id"]) in set(query["relevant"])]
        hit += bool(ranks)
        reciprocal.append(1 / ranks[0] if ranks else 0.0)
        blocks = hit_blocks(text, [h["chunk_id"] for h in hits])
        shown += any(contains_answer(blocks.get(hits[r - 1]["chunk_id"], ""), query) for r in ranks)
        sizes.append(len(text))
        tokens.append(len(TOKENIZER.encode(text, add_special_tokens=False).ids))
    n = len(queries)
    return {
        "n": n,
        "hit@5": hit / n,
        "mrr@5": sum(reciprocal) / n,
        "answer@5": shown / n,
        "text_p50": statistics.median(sizes),
        "tokens_p50": statistics.median(tokens),
    }


async def check_labels(client: Client, spec: dict[str, Any], names: dict[str, str]) -> list[str]:
    """Queries none of whose relevant documents (as ingested) contains the answer: labelling errors."""
    ids = {name: doc_id for doc_id, name in names.items()}
    content: dict[str, str] = {}
    for name in {n for q in spec["hard"] + spec["easy"] for n in q["relevant"]}:
        read = await client.read_resource(f"documents:///{ids[name]}/content.txt")
        content[name] = "".join(getattr(c, "text", "") for c in read.contents)
    queries = spec["hard"] + spec["easy"]
    return [q["q"] for q in queries if not any(contains_answer(content[n], q) for n in q["relevant"])]


async def latency(clients: dict[str, Client], queries: list[str], rounds: int) -> dict[str, list[float]]:
    """p50 per round per side; the sides alternate on every query (and who goes first, per round)."""
    p50s: dict[str, list[float]] = {side: [] for side in clients}
    for number in range(rounds):
        samples: dict[str, list[float]] = {side: [] for side in clients}
        order = list(clients) if number % 2 == 0 else list(reversed(clients))
        for query in queries:
            for side in order:
                started = time.perf_counter()
                await search(clients[side], query, 900)
                samples[side].append((time.perf_counter() - started) * 1000)
        for side, values in samples.items():
            p50s[side].append(statistics.median(values))
    return p50s


def query_sets(spec: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    return {
        "easy": spec["easy"],
        "hard tune": [q for q in spec["hard"] if q["split"] == "tune"],
        "hard held-out": [q for q in spec["hard"] if q["split"] == "held_out"],
    }


async def measure(db: Path, work: Path, spec: dict[str, Any], rounds: int) -> dict[str, Any]:
    out: dict[str, Any] = {"sets": {}, "curve": {}, "labels_unanswered": []}
    async with contextlib.AsyncExitStack() as stack:
        servers = {side: await stack.enter_async_context(server(db, work / side, flag)) for side, flag in SIDES.items()}
        clients = {side: client for side, (client, _) in servers.items()}
        names = await document_names(clients["rrf"])
        out["labels_unanswered"] = await check_labels(clients["rrf"], spec, names)
        for name, queries in query_sets(spec).items():
            out["sets"][name] = {side: await score(client, queries, names, 900) for side, client in clients.items()}
        for context in CONTEXTS:
            out["curve"][context] = {
                side: await score(client, spec["hard"], names, context) for side, client in clients.items()
            }
        texts = [q["q"] for q in spec["hard"] + spec["easy"]]
        out["p50_ms"] = await latency(clients, texts, rounds)
        out["rss_mb"] = {side: round(process.memory_info().rss / 2**20) for side, (_, process) in servers.items()}
    return out


async def measure_context45(db: Path, work: Path, spec: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for side, flag in SIDES.items():
        async with server(db, work / side, flag) as (client, _):
            names = await document_names(client)
            out[side] = await score(client, spec["queries"], names, 900)
    return out


def _row(name: str, a: dict[str, float], b: dict[str, float]) -> str:
    cells = [f"{a[k]:>5.3f} > {b[k]:<5.3f}" for k in ("hit@5", "mrr@5", "answer@5")]
    sizes = f"  {a['text_p50']:>6,.0f} > {b['text_p50']:<6,.0f}  {a['tokens_p50']:>5,.0f} > {b['tokens_p50']:<5,.0f}"
    return f"{name:<15}{b['n']:>4}  " + "  ".join(cells) + sizes


def report(r: dict[str, Any]) -> None:
    print(f"\nsearch, limit 5, context 900, {r['documents']} documents; rrf (search.rerank=false) > rerank (default)")
    print(f"{'set':<15}{'n':>4}  {'hit@5':>13}  {'MRR@5':>13}  {'answer@5':>13}  {'text p50':>15}  {'tokens p50':>13}")
    for name, sides in r["sets"].items():
        print(_row(name, sides["rrf"], sides["rerank"]))
    if "context45" in r:
        print(_row("context45", r["context45"]["rrf"], r["context45"]["rerank"]))
    print("\nanswer@5 on all hard questions against context (median result text): rrf | rerank")
    for context, sides in r["curve"].items():
        a, b = sides["rrf"], sides["rerank"]
        print(
            f"  context {context:>5}: {a['answer@5']:.3f} ({a['text_p50']:>6,.0f}) | "
            f"{b['answer@5']:.3f} ({b['text_p50']:>6,.0f})"
        )
    a, b = r["p50_ms"]["rrf"], r["p50_ms"]["rerank"]
    ratios = [y / x for x, y in zip(a, b, strict=True)]
    print(
        f"\nsearch p50 over {len(a)} rounds: rrf {min(a):.1f}-{max(a):.1f} ms, rerank {min(b):.1f}-{max(b):.1f} ms, "
        f"ratio {min(ratios):.2f}-{max(ratios):.2f} (median {statistics.median(ratios):.2f})"
    )
    print(f"server RSS at the end: rrf {r['rss_mb']['rrf']} MB, rerank {r['rss_mb']['rerank']} MB")
    if r["labels_unanswered"]:
        print(f"warning: no relevant document contains the answer of {r['labels_unanswered']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3, help="latency rounds (interleaved)")
    parser.add_argument("--context45", action="store_true", help="also the 45 queries of bench/context.py")
    parser.add_argument("--rebuild", action="store_true", help="rebuild the cached knowledge bases")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()
    host = machine()
    spec = json.loads(DATA.read_text())
    cache = args.out / "passages"
    digest = copy_corpus(spec, cache / "corpus")
    db = cache / f"kb-{digest}.lancedb"
    build_kb(ROOT, cache / "corpus", db, cache, args.rebuild)
    r: dict[str, Any] = {"documents": len(spec["documents"]), "corpus": digest}
    r.update(anyio.run(measure, db, cache, spec, args.rounds))
    if args.context45:
        spec45 = json.loads(CONTEXT45.read_text())
        digest45, _ = write_corpus(spec45, cache / "corpus45")
        db45 = cache / f"kb45-{digest45}.lancedb"
        build_kb(ROOT, cache / "corpus45", db45, cache, args.rebuild)
        r["context45"] = anyio.run(measure_context45, db45, cache, spec45)
    report(r)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"passages-{time.strftime('%Y%m%d-%H%M%S')}.json").write_text(json.dumps(r, indent=2))
    print(f"{describe()}; load at the start {host['load_1_5_15']}, at the end {machine()['load_1_5_15']}")
    print(json.dumps({"bench": "passages", "machine": host, **r}))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
