"""Ranking settings side by side on the tuning question sets, in one process (seconds per setting).

bench/passages.py measures a setting through stdio servers, minutes per run; choosing weights
needs dozens of settings. This script opens the two knowledge bases bench/passages.py builds
(36 Debian documents; 51 manuals for the 45 queries of bench/context.py), fetches each
question's candidates once (`search.candidates` per leg, the store's query) and ranks them under
every setting given, through the same code as the search tool (search_passages, then the tool's
text for limit 5 and `search.context_chars`: 900 unless a variant sets it). Sets: easy, hard tune,
hard held-out (tuning data since it was looked at twice), context45, fresh plain and fresh hard
(bench/data/fresh_queries.json), fresh2 plain and fresh2 hard (bench/data/fresh2_queries.json),
fresh3 plain and fresh3 hard
(bench/data/fresh3_queries.json), fresh4 plain and fresh4 hard (bench/data/fresh4_queries.json),
fresh5 plain and fresh5 hard (bench/data/fresh5_queries.json), fresh6 plain and fresh6 hard
(bench/data/fresh6_queries.json) and fresh7 plain and fresh7 hard (bench/data/fresh7_queries.json),
each tuning data since its one run. fresh8 (bench/data/fresh8_queries.json), the held-out split now,
is never ranked here: it is not in this list and no option reads it; bench/passages.py --split fresh8
runs it once, after tuning, with the final code. A held-out split written later must stay out of
this list until its run.

    python bench/rank_sweep.py [--variant NAME:KEY=VALUE,...] [--misses] [--out bench/results]

KEY is a search setting (weight_keyword=0.3, weight_passage=0, passage_candidates=16; every field of
search/rerank.py's Weights has one, which search/passages.py passes). Figures per set: hit@1,
MRR@5, hit@5 by document, answer@5 (a relevant hit's text, as the tool shows it, holds the
answer phrase), bare headings, median result text; the first variant is the defaults. With --misses, each
question missed at rank 1 or answer, and where its relevant documents (and the chunk holding the answer) stand
in each leg among the candidates.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from _machine import describe, machine
from context import bare_heading, build_kb, code_digest, contains_answer, hit_blocks, write_corpus
from passages import CONTEXT45, DATA, FRESH, FRESH2, FRESH3, FRESH4, FRESH5, FRESH6, FRESH7, ROOT, copy_corpus, variant

import mcp_analysis.search.passages as passages_module
from mcp_analysis.config import load_settings
from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.server import uris
from mcp_analysis.tooling.search_hits import search_result

KEYS = ("hit@1", "mrr@5", "hit@5", "answer@5", "bare_headings", "text_p50")


class Fixed:
    """Each question's candidates and vector, fetched once and handed out as copies (re-ranking
    rewrites their scores)."""

    def __init__(self) -> None:
        self.candidates: dict[str, Any] = {}
        self.fetch = passages_module.hybrid_search
        self.last: dict[str, Any] = {}  # query -> its candidates as fetched (for --misses)

    async def __call__(self, store: Any, vector: Any, query: str, *args: Any, **kwargs: Any) -> Any:
        key = (id(store), query, args, tuple(sorted(kwargs.items())))  # another store or candidates: another query
        if key not in self.candidates:
            self.candidates[key] = await self.fetch(store, vector, query, *args, **kwargs)
        self.last[query] = self.candidates[key]
        return copy.deepcopy(self.candidates[key])


def legs(candidates: list[Any], names: dict[str, str], query: dict[str, Any], per_leg: int) -> str:
    """Where a missed question's relevant documents stand in each leg: the best rank of any of their chunks
    and of a chunk holding the answer, by cosine (the vector leg's order: its `per_leg` best are the leg's
    rows) and by BM25 (the full-text leg's), among the candidates ("-": not among that leg's rows)."""
    by_vector = sorted(candidates, key=lambda h: -h.evidence.cosine)[:per_leg]
    by_keyword = sorted((h for h in candidates if h.evidence.keyword), key=lambda h: -h.evidence.keyword)
    ranks = [{h.chunk.id: i for i, h in enumerate(leg, 1)} for leg in (by_vector, by_keyword)]
    relevant = [h for h in candidates if names.get(h.chunk.document_id) in set(query["relevant"])]
    answering = [h for h in relevant if contains_answer(h.chunk.content, query)]

    def where(hits: list[Any]) -> str:
        best = [min((rank[h.chunk.id] for h in hits if h.chunk.id in rank), default=None) for rank in ranks]
        return ", ".join(f"{leg} {'-' if b is None else b}" for leg, b in zip(("vector", "keyword"), best, strict=True))

    answer = f"answer chunk: {where(answering)}" if answering else "no answer chunk among the candidates"
    return f"document: {where(relevant)}; {answer}"


async def score(
    kb: KnowledgeBase, queries: list[dict[str, Any]], settings: Any, vectors: dict, fixed: Fixed | None = None
) -> dict[str, Any]:
    visible = await kb.visible(None)
    names = {doc_id: meta.uri.rsplit("/", 1)[-1] for doc_id, meta in visible.items()}
    first = found = shown = bare = 0
    reciprocal, sizes, misses = [], [], []
    for query in queries:
        if query["q"] not in vectors:
            vectors[query["q"]] = await (await kb.embedder()).embed_query(query["q"])
        results = await passages_module.search_passages(
            kb.store, vectors[query["q"]], query["q"], 5, None, visible, settings
        )
        resource = uris.document_file("{document_id}", "content.txt")
        widths = settings.context_chars, settings.max_context_chars
        out, text = search_result("bench", query["q"], results, *widths, "", 10**9, resource)
        ranks = [i for i, h in enumerate(out.results, 1) if names.get(h.document_id) in set(query["relevant"])]
        blocks = hit_blocks(text, [h.chunk_id for h in out.results])
        answered = any(contains_answer(blocks.get(out.results[r - 1].chunk_id, ""), query) for r in ranks)
        found += bool(ranks)
        first += bool(ranks) and ranks[0] == 1
        shown += answered
        reciprocal.append(1 / ranks[0] if ranks else 0.0)
        bare += sum(bare_heading(h.model_dump()) for h in out.results)
        sizes.append(len(text))
        if not ranks or ranks[0] != 1 or not answered:
            miss = {"q": query["q"], "rank": ranks[0] if ranks else None, "answer_shown": answered}
            if fixed is not None and query["q"] in fixed.last:
                miss["legs"] = legs(fixed.last[query["q"]], names, query, settings.candidates)
            misses.append(miss)
    n = len(queries)
    return {
        "n": n,
        "hit@1": first / n,
        "mrr@5": sum(reciprocal) / n,
        "hit@5": found / n,
        "answer@5": shown / n,
        "bare_headings": bare,
        "text_p50": statistics.median(sizes),
        "misses": misses,
    }


def knowledge_bases(cache: Path) -> dict[str, Path]:
    spec, spec45 = json.loads(DATA.read_text()), json.loads(CONTEXT45.read_text())
    digest = copy_corpus(spec, cache / "corpus")
    digest45 = write_corpus(spec45, cache / "corpus45")[0]
    dbs = {}
    for name, corpus, key in (("kb", "corpus", digest), ("kb45", "corpus45", digest45)):
        dbs[name] = cache / f"{name}-{key}-{code_digest(ROOT)}.lancedb"
        build_kb(ROOT, cache / corpus, dbs[name], cache, False)
    return dbs


def tuning_sets() -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Each knowledge base's question sets, by name ("kb": the 36 documents, "kb45": context45's 51)."""
    spec, spec45 = json.loads(DATA.read_text()), json.loads(CONTEXT45.read_text())
    fresh, fresh2, fresh3, fresh4, fresh5, fresh6, fresh7 = (
        json.loads(path.read_text()) for path in (FRESH, FRESH2, FRESH3, FRESH4, FRESH5, FRESH6, FRESH7)
    )
    return {
        "kb": {
            "easy": spec["easy"],
            "hard tune": [q for q in spec["hard"] if q["split"] == "tune"],
            "hard held-out": [q for q in spec["hard"] if q["split"] == "held_out"],
            "fresh plain": fresh["easy"],
            "fresh hard": fresh["hard"],
            "fresh2 plain": fresh2["easy"],
            "fresh2 hard": fresh2["hard"],
            "fresh3 plain": fresh3["easy"],
            "fresh3 hard": fresh3["hard"],
            "fresh4 plain": fresh4["easy"],
            "fresh4 hard": fresh4["hard"],
            "fresh5 plain": fresh5["easy"],
            "fresh5 hard": fresh5["hard"],
            "fresh6 plain": fresh6["easy"],
            "fresh6 hard": fresh6["hard"],
            "fresh7 plain": fresh7["easy"],
            "fresh7 hard": fresh7["hard"],
        },
        "kb45": {"context45": spec45["queries"]},
    }


async def measure(dbs: dict[str, Path], variants: list[tuple[str, dict[str, str]]]) -> dict[str, Any]:
    sets = tuning_sets()
    fixed = Fixed()
    passages_module.hybrid_search = fixed  # type: ignore[assignment]
    out: dict[str, dict[str, Any]] = {name: {} for name, _ in variants}
    for kb_name, db in dbs.items():
        base = load_settings(db=str(db))
        kb = await KnowledgeBase.open(base)
        vectors: dict[str, Any] = {}
        try:
            for name, env in variants:
                settings = type(base.search).model_validate({**base.search.model_dump(), **env})
                for set_name, queries in sets[kb_name].items():
                    out[name][set_name] = await score(kb, queries, settings, vectors, fixed)
        finally:
            await kb.close()
    return out


def report(results: dict[str, Any], misses: bool) -> None:
    for name, sets in results.items():
        print(f"\n{name}")
        for set_name, m in sets.items():
            cells = "  ".join(
                f"{k} {m[k]:,.0f}" if k in ("bare_headings", "text_p50") else f"{k} {m[k]:.3f}" for k in KEYS
            )
            print(f"  {set_name:<14}{m['n']:>4}  {cells}")
            for miss in m["misses"] if misses else ():
                print(f"      rank {miss['rank']}, answer shown {miss['answer_shown']}: {miss['q']}")
                if "legs" in miss:
                    print(f"          {miss['legs']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variant", action="append", type=variant, default=[], help="NAME:KEY=VALUE,...")
    parser.add_argument("--misses", action="store_true", help="list each set's questions missed at rank 1 or answer")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()
    host = machine()
    dbs = knowledge_bases(args.out / "passages")
    results = asyncio.run(measure(dbs, [("defaults", {}), *args.variant]))
    report(results, args.misses)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"rank_sweep-{time.strftime('%Y%m%d-%H%M%S')}.json").write_text(json.dumps(results, indent=2))
    print(f"{describe()}; load at the start {host['load_1_5_15']}, at the end {machine()['load_1_5_15']}")


if __name__ == "__main__":
    sys.exit(main())
