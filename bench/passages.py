"""Does the passage a search result shows hold the answer, for questions asked in other words?

One knowledge base, built by this tree's code from 36 documents Debian ships (the licence texts in
/usr/share/common-licenses, the libffi manual, four READMEs, users-and-groups.html), copied from
the paths in bench/data/passages_queries.json and sha256-checked. Stdio servers on it, queried
in the same run (their calls interleaved for latency), by default:

- "rrf": `search.rerank=false` (reciprocal-rank fusion of both legs' candidates, hits of one
  document merged when their grown passages touch, excerpts placed by the query's words);
- "rerank": the default (fused vector, keyword and title scores; separate passages; excerpts placed
  on the best-scoring anchors; the hits share `context` x hits characters, the best-ranked get more).

`--baseline REV` measures the code of git revision REV ("base", on a knowledge base built by
that code) against this tree ("new", on one built by this tree); `--variant NAME:KEY=VALUE,...`
adds a server of this tree with other settings (environment variables, e.g.
`c20:MCP_ANALYSIS_SEARCH__CANDIDATES=20`).

Query sets: easy (shares the documents' words), hard tune (paraphrased, detail-seeking,
near-duplicate documents); hard held-out only with --held-out (the split is fixed in the data
file, each hard question's "split"; both old splits have been looked at more than once and are
tuning data now); with --context45 also the 45 queries of bench/context.py over 51 manuals (a
second knowledge base). `--split fresh` adds the questions of bench/data/fresh_queries.json
(plain and paraphrased, over the same 36 documents; held out for one run, tuning data since);
`--split fresh2` to `--split fresh7` those of bench/data/fresh2_queries.json ... fresh7_queries.json
(each held out for one run, tuning data since); `--split fresh8` those of
bench/data/fresh8_queries.json, the held-out split now: run once, after tuning, with the final code,
never to choose a setting (a held-out split is written, and committed alone, before the ranking
change it is to check).
For each: hit@1, hit@5 and MRR@5 by document, answer@5 (the text the model is shown for a
relevant hit contains the answer phrase), bare headings (hits whose text is a heading plus at
most 3 words, over all top-5 lists) and the median characters of a search result's text (and
WordPiece tokens). With --curve, answer@5 against the `context` argument; then search p50 over
interleaved calls (several rounds) and each server's RSS at the end.

    python bench/passages.py [--baseline REV] [--variant NAME:K=V,...] [--held-out] [--context45]
                             [--split fresh|fresh2|...|fresh7|fresh8] [--curve] [--rounds 3] [--rebuild]
                             [--out bench/results]

Targets: hard answer@5 >= 0.92, hit@5 1.0 and MRR >= 0.93; easy MRR@5 >= 0.97, hit@1 >= 0.93;
median result text <= 6,000 characters; 0 bare headings; search p50 at most 1.2x the baseline's.
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
from context import (
    bare_heading,
    baseline_checkout,
    build_kb,
    code_digest,
    contains_answer,
    document_names,
    hit_blocks,
    side_env,
    text_of,
    write_corpus,
)
from mcp import Client, StdioServerParameters

from mcp_analysis.embed.onnx_model import load_tokenizer

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "bench" / "data" / "passages_queries.json"
CONTEXT45 = ROOT / "bench" / "data" / "context_queries.json"
FRESH = ROOT / "bench" / "data" / "fresh_queries.json"
FRESH2 = ROOT / "bench" / "data" / "fresh2_queries.json"
FRESH3 = ROOT / "bench" / "data" / "fresh3_queries.json"
FRESH4 = ROOT / "bench" / "data" / "fresh4_queries.json"
FRESH5 = ROOT / "bench" / "data" / "fresh5_queries.json"
FRESH6 = ROOT / "bench" / "data" / "fresh6_queries.json"
FRESH7 = ROOT / "bench" / "data" / "fresh7_queries.json"
FRESH8 = ROOT / "bench" / "data" / "fresh8_queries.json"
SPLITS = {
    "fresh": FRESH,
    "fresh2": FRESH2,
    "fresh3": FRESH3,
    "fresh4": FRESH4,
    "fresh5": FRESH5,
    "fresh6": FRESH6,
    "fresh7": FRESH7,
    "fresh8": FRESH8,
}
DEFAULT_SIDES = {"rrf": {"MCP_ANALYSIS_SEARCH__RERANK": "false"}, "rerank": {}}
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
async def server(side: Side, work: Path) -> AsyncIterator[tuple[Client, psutil.Process]]:
    env = {**side_env(side.code, work), **side.env}
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "mcp_analysis", "--db", str(side.db), "serve"], env=env, cwd=str(side.code)
    )
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    async with Client(params) as client:
        await client.list_tools()
        started = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
        yield client, next(p for p in started if "serve" in p.cmdline())


class Side:
    """A server to measure: the code it runs, the knowledge base it serves, its settings."""

    def __init__(self, code: Path, db: Path, env: dict[str, str]) -> None:
        self.code, self.db, self.env = code, db, env


async def search(client: Client, query: str, context: int) -> Any:
    result = await client.call_tool("search", {"query": query, "limit": 5, "context": context})
    if result.is_error:
        raise RuntimeError(f"search({query!r}) failed: {text_of(result)[:300]}")
    return result


async def score(client: Client, queries: list[dict[str, Any]], names: dict[str, str], context: int) -> dict[str, float]:
    """hit@1, hit@5 and MRR@5 by document, answer@5 in the shown text, bare headings, median result text size."""
    hit = first = shown = bare = 0
    reciprocal, sizes, tokens = [], [], []
    for query in queries:
        result = await search(client, query["q"], context)
        text = text_of(result)
        hits = result.structured_content["results"]
        ranks = [i for i, h in enumerate(hits, start=1) if names.get(h["document_id"]) in set(query["relevant"])]
        hit += bool(ranks)
        first += bool(ranks) and ranks[0] == 1
        bare += sum(bare_heading(h) for h in hits)
        reciprocal.append(1 / ranks[0] if ranks else 0.0)
        blocks = hit_blocks(text, [h["chunk_id"] for h in hits])
        shown += any(contains_answer(blocks.get(hits[r - 1]["chunk_id"], ""), query) for r in ranks)
        sizes.append(len(text))
        tokens.append(len(TOKENIZER.encode(text, add_special_tokens=False).ids))
    n = len(queries)
    return {
        "n": n,
        "hit@1": first / n,
        "hit@5": hit / n,
        "mrr@5": sum(reciprocal) / n,
        "answer@5": shown / n,
        "bare_headings": bare,
        "text_p50": statistics.median(sizes),
        "tokens_p50": statistics.median(tokens),
    }


async def check_labels(client: Client, spec: dict[str, Any], names: dict[str, str]) -> list[str]:
    """Queries none of whose relevant documents (as ingested) contains the answer: labelling errors."""
    ids = {name: doc_id for doc_id, name in names.items()}
    content: dict[str, str] = {}
    fresh = spec.get("fresh", {})
    queries = spec["hard"] + spec["easy"] + fresh.get("hard", []) + fresh.get("easy", [])
    for name in {n for q in queries for n in q["relevant"]}:
        read = await client.read_resource(f"documents:///{ids[name]}/content.txt")
        content[name] = "".join(getattr(c, "text", "") for c in read.contents)
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


def query_sets(spec: dict[str, Any], held_out: bool) -> dict[str, list[dict[str, Any]]]:
    sets = {"easy": spec["easy"], "hard tune": [q for q in spec["hard"] if q["split"] == "tune"]}
    if held_out:
        sets["hard held-out"] = [q for q in spec["hard"] if q["split"] == "held_out"]
    if "fresh" in spec:
        sets[f"{spec['split']} plain"] = spec["fresh"]["easy"]
        sets[f"{spec['split']} hard"] = spec["fresh"]["hard"]
    return sets


async def measure(sides: dict[str, Side], work: Path, spec: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"sets": {}, "curve": {}, "labels_unanswered": []}
    async with contextlib.AsyncExitStack() as stack:
        servers = {name: await stack.enter_async_context(server(side, work / name)) for name, side in sides.items()}
        clients = {name: client for name, (client, _) in servers.items()}
        first = next(iter(clients.values()))
        names = await document_names(first)
        out["labels_unanswered"] = await check_labels(first, spec, names)
        sets = query_sets(spec, args.held_out)
        for name, queries in sets.items():
            out["sets"][name] = {}
            for side, client in clients.items():
                side_names = await document_names(client)
                out["sets"][name][side] = await score(client, queries, side_names, 900)
        for context in CONTEXTS if args.curve else ():
            hard = [q for name, queries in sets.items() if name.startswith("hard") for q in queries]
            out["curve"][context] = {
                side: await score(client, hard, await document_names(client), context)
                for side, client in clients.items()
            }
        texts = [q["q"] for name, queries in sets.items() for q in queries]
        out["p50_ms"] = await latency(clients, texts, args.rounds)
        out["rss_mb"] = {side: round(process.memory_info().rss / 2**20) for side, (_, process) in servers.items()}
    return out


async def measure_context45(sides: dict[str, Side], work: Path, spec: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for name, side in sides.items():
        async with server(side, work / name) as (client, _):
            names = await document_names(client)
            out[name] = await score(client, spec["queries"], names, 900)
    return out


KEYS = ("hit@1", "hit@5", "mrr@5", "answer@5", "bare_headings", "text_p50", "tokens_p50")


def _row(name: str, sides: dict[str, dict[str, float]]) -> str:
    n = next(iter(sides.values()))["n"]
    cells = []
    for key in KEYS:
        values = [sides[side][key] for side in sides]
        shown = [f"{v:,.0f}" if key in ("bare_headings", "text_p50", "tokens_p50") else f"{v:.3f}" for v in values]
        cells.append(" > ".join(shown))
    return f"{name:<15}{n:>4}  " + "  ".join(f"{c:>{max(13, len(c))}}" for c in cells)


def report(r: dict[str, Any]) -> None:
    order = " > ".join(r["sides"])
    print(f"\nsearch, limit 5, context 900, {r['documents']} documents; {order}")
    print(f"{'set':<15}{'n':>4}  " + "  ".join(f"{k:>13}" for k in KEYS))
    for name, sides in r["sets"].items():
        print(_row(name, sides))
    if "context45" in r:
        print(_row("context45", r["context45"]))
    if r["curve"]:
        print(f"\nanswer@5 on the hard questions against context (median result text): {order}")
        for context, sides in r["curve"].items():
            shown = " | ".join(f"{v['answer@5']:.3f} ({v['text_p50']:>6,.0f})" for v in sides.values())
            print(f"  context {context:>5}: {shown}")
    first = next(iter(r["p50_ms"]))
    base = r["p50_ms"][first]
    for side, values in r["p50_ms"].items():
        ratios = [y / x for x, y in zip(base, values, strict=True)]
        print(
            f"search p50 over {len(values)} rounds, {side}: {min(values):.1f}-{max(values):.1f} ms, "
            f"x{statistics.median(ratios):.2f} of {first} (median of rounds)"
        )
    print("server RSS at the end: " + ", ".join(f"{side} {mb} MB" for side, mb in r["rss_mb"].items()))
    if r["labels_unanswered"]:
        print(f"warning: no relevant document contains the answer of {r['labels_unanswered']}")


def variant(text: str) -> tuple[str, dict[str, str]]:
    name, _, pairs = text.partition(":")
    env = dict(pair.split("=", 1) for pair in pairs.split(",") if pair)
    return name, env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3, help="latency rounds (interleaved)")
    parser.add_argument("--baseline", help="git revision measured as 'base' against this tree ('new')")
    parser.add_argument("--variant", action="append", type=variant, default=[], help="NAME:KEY=VALUE,...")
    parser.add_argument("--held-out", action="store_true", help="also the held-out split (once, after tuning)")
    parser.add_argument("--context45", action="store_true", help="also the 45 queries of bench/context.py")
    parser.add_argument(
        "--split",
        choices=list(SPLITS),
        help="also a fresh split's questions (bench/data/fresh*_queries.json): fresh to fresh7, each held out for "
        "one run, tuning data since; fresh8, the held-out split now: run once, after tuning, with the final code, "
        "never to choose a setting",
    )
    parser.add_argument("--curve", action="store_true", help="answer@5 against the context argument")
    parser.add_argument("--rebuild", action="store_true", help="rebuild the cached knowledge bases")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()
    host = machine()
    spec = json.loads(DATA.read_text())
    if args.split:
        spec["fresh"], spec["split"] = json.loads(SPLITS[args.split].read_text()), args.split
    spec45 = json.loads(CONTEXT45.read_text()) if args.context45 else None
    cache = args.out / "passages"
    digest = copy_corpus(spec, cache / "corpus")
    digest45 = write_corpus(spec45, cache / "corpus45")[0] if spec45 else ""
    r: dict[str, Any] = {
        "documents": len(spec["documents"]),
        "corpus": digest,
        "baseline": args.baseline,
        "split": args.split,
    }
    with contextlib.ExitStack() as stack:
        codes = {"new": ROOT}
        if args.baseline:
            codes = {"base": stack.enter_context(baseline_checkout(args.baseline)), "new": ROOT}

        def kb(code: Path, corpus: str, name: str) -> Path:
            db = cache / f"{name}-{corpus}-{code_digest(code)}.lancedb"
            build_kb(code, cache / ("corpus45" if name == "kb45" else "corpus"), db, cache, args.rebuild)
            return db

        def sides_for(name: str, corpus: str) -> dict[str, Side]:
            dbs = {label: kb(code, corpus, name) for label, code in codes.items()}
            if args.baseline:
                sides = {label: Side(codes[label], dbs[label], {}) for label in codes}
            else:
                sides = {label: Side(ROOT, dbs["new"], env) for label, env in DEFAULT_SIDES.items()}
            sides.update({label: Side(ROOT, dbs["new"], env) for label, env in args.variant})
            return sides

        r["sides"] = list(sides_for("kb", digest))
        r.update(anyio.run(measure, sides_for("kb", digest), cache, spec, args))
        if spec45:
            r["context45"] = anyio.run(measure_context45, sides_for("kb45", digest45), cache, spec45)
    report(r)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"passages-{time.strftime('%Y%m%d-%H%M%S')}.json").write_text(json.dumps(r, indent=2))
    print(f"{describe()}; load at the start {host['load_1_5_15']}, at the end {machine()['load_1_5_15']}")
    print(json.dumps({"bench": "passages", "machine": host, **r}))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
