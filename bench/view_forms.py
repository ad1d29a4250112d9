"""The legs of a view passing a tenth of the documents through Lance's scanner, form by form, against the
unfiltered legs (bench/search.py times the whole search; bench/view_split.py split the legs before the scanner).

On a cached synthetic knowledge base, for the view `bench/search.py` times as "a tenth passes", each leg as
the store runs it (`StoreCandidates.candidates`: the view's chunk rows as Lance's allowlist, its vector leg at
the plan's ef) and in other forms, each query timing every form in turn (who goes first rotates), medians over
the queries of each of `--repeat` passes:

- the vector leg at other ef / refine factors, with scanner options (``fast_search``,
  ``late_materialization``), and unfiltered for 1.5 x 50 / share rows with the hidden ones dropped; each with
  its recall@10 under the view (truth: the exact 10 nearest among the view's rows, an exact scan of them);
- the full-text leg under the allowlist and unfiltered for more rows with the hidden ones dropped (whether it
  keeps the allowlist's 50 rows, in order);
- both legs at once (as a search runs them) and one after the other, under the view and unfiltered: whether
  the two threads run in parallel;
- the view's rows as the store finds them again for a search (cached per view and version) and anew;
- the whole search's phases, unfiltered and under the view (`_search_phases.phases`): which ms are the view's.

    python bench/view_forms.py [--dir bench/results/rebuild] [--size 1000000] [--queries 20] [--repeat 3]
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import describe, machine
from _search_phases import PHASES, phases
from _synthetic import settings_for, vocabulary
from search import FILTER, LIMIT

from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.search.hybrid import view_legs
from mcp_analysis.store.candidates import CHUNK_COLUMNS, POST_FILTER_MARGIN

FILTERED = "a tenth passes"
ROWS = 50  # search.candidates' default: each leg's rows


def _ids(table: Any) -> list[str]:
    return table.column("id").to_pylist()


def _visible_head(table: Any, passes: Callable[[Any], bool], rows: int) -> list[str]:
    return [i for i, d in zip(_ids(table), table.column("document_id").to_pylist(), strict=True) if passes(d)][:rows]


async def forms(path: Path, queries: int, repeat: int) -> dict[str, Any]:
    kb = await KnowledgeBase.open(settings_for(path))
    settings = kb.settings.search
    refine, ef = settings.ann_refine_factor, settings.ann_ef
    lance = await kb.store.scanner_legs(settings.scanner_min_chunks)
    assert lance is not None, "the legs run through LanceDB at this size: nothing to compare"
    view = await kb.open_corpus(FILTER)
    prefilter = await kb.prefilter(view.filter)
    assert prefilter is not None
    started = time.perf_counter()
    plan = await kb.store.view_plan(prefilter, view_legs(settings), vector=True)
    found_ms = (time.perf_counter() - started) * 1000
    started = time.perf_counter()
    await kb.store.view_plan(prefilter, view_legs(settings), vector=True)
    cached_ms = (time.perf_counter() - started) * 1000
    assert plan.rows is not None and plan.rows.allowed and not (plan.flat or plan.post)
    version, allowed, share = plan.rows.version, plan.rows.allowed, plan.share
    view_ef = plan.ef(ef, ROWS * refine)
    dataset, columns = lance.dataset(version), list(CHUNK_COLUMNS)
    over = math.ceil(ROWS * POST_FILTER_MARGIN / share)
    words, rng = vocabulary(), np.random.default_rng(11)
    texts = [" ".join(words[i] for i in rng.choice(400, size=rng.integers(2, 6))) for _ in range(queries + 1)]
    embedder = await kb.embedder()
    units = [np.asarray(await embedder.embed_query(q), dtype=np.float32) for q in texts]
    units = [u / np.linalg.norm(u) for u in units]
    where = prefilter.expression.to_sql()

    def vector(unit: np.ndarray, leg_ef: int, leg_refine: int, **options: Any) -> Any:
        nearest = {"column": "vector", "q": unit, "k": ROWS, "metric": "cosine", "ef": leg_ef, "nprobes": 20}
        nearest["refine_factor"] = leg_refine
        restrict = {"prefilter": True, "row_addr_allowlist": allowed}
        scanner = dataset.scanner(
            columns=[*columns, "_distance"], nearest=nearest, disable_scoring_autoprojection=True, **restrict, **options
        )
        return scanner.to_table()

    def vector_unfiltered(unit: np.ndarray) -> Any:
        found = lance.vector(version, unit, columns, over, None, ef=max(ef, over * refine), refine_factor=refine)
        return [r["id"] for r in found if prefilter.passes(r["document_id"])][:ROWS]

    def keyword(q: str, **options: Any) -> Any:
        text = {"query": q, "columns": ["content_fts"]}
        scanner = dataset.scanner(
            columns=[*columns, "vector", "_score"],
            full_text_query=text,
            limit=ROWS,
            prefilter=True,
            row_addr_allowlist=allowed,
            disable_scoring_autoprojection=True,
            **options,
        )
        return scanner.to_table()

    def truth(unit: np.ndarray) -> set[str]:
        nearest = {"column": "vector", "q": unit, "k": 10, "metric": "cosine", "use_index": False}
        exact = dataset.scanner(columns=["id", "_distance"], nearest=nearest, prefilter=True, filter=where)
        return set(_ids(exact.to_table()))

    view_refine = plan.refine(refine)  # the store's, as `StoreCandidates.candidates` sends it
    today = functools.partial(vector, leg_ef=view_ef, leg_refine=view_refine)
    vector_forms: dict[str, Callable[[np.ndarray], Any]] = {
        f"the store's: allowlist, ef {view_ef}, refine {view_refine}": today,
        f"ef {view_ef}, refine {view_refine}, fast_search": functools.partial(today, fast_search=True),
        f"ef {view_ef}, refine {view_refine}, late_materialization": functools.partial(
            today, late_materialization=True
        ),
    }
    for leg_ef, leg_refine in ((view_ef, refine), (200, 3), (150, 3), (100, 2)):  # Lance: ef >= rows x refine
        if (leg_ef, leg_refine) == (view_ef, view_refine):
            continue
        vector_forms[f"ef {leg_ef}, refine {leg_refine}"] = functools.partial(
            vector, leg_ef=leg_ef, leg_refine=leg_refine
        )
    vector_forms[f"unfiltered, {over} rows at ef {max(ef, over * refine)}, post-filtered"] = vector_unfiltered
    keyword_forms: dict[str, Callable[[str], Any]] = {
        "the store's: allowlist": keyword,
        "allowlist, late_materialization": functools.partial(keyword, late_materialization=True),
        f"unfiltered, {over} rows, post-filtered": lambda q: lance.keyword(
            version, q, [*columns, "vector"], over, None
        ),
    }

    async def in_thread(func: Callable[..., Any], arg: Any) -> Any:
        return await anyio.to_thread.run_sync(func, arg)

    async def both(vector_leg: Callable[..., Any], keyword_leg: Callable[..., Any], q: str, u: np.ndarray) -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(in_thread, vector_leg, u)
            group.start_soon(in_thread, keyword_leg, q)

    def unfiltered_vector(u: np.ndarray) -> Any:
        return lance.vector(version, u, columns, ROWS, None, ef=max(ef, ROWS * refine), refine_factor=refine)

    def unfiltered_keyword(q: str) -> Any:
        return lance.keyword(version, q, [*columns, "vector"], ROWS, None)

    truths = [truth(u) for u in units[1:]]
    await both(today, keyword, texts[0], units[0])  # warms the caches
    await both(unfiltered_vector, unfiltered_keyword, texts[0], units[0])
    passes: list[dict[str, float]] = []
    split: list[dict[str, dict[str, float]]] = []
    recall: dict[str, list[float]] = defaultdict(list)
    kept: dict[str, int] = defaultdict(int)
    overlap: dict[str, list[float]] = defaultdict(list)
    for _ in range(repeat):
        spent: dict[str, list[float]] = defaultdict(list)
        for i, (q, u) in enumerate(zip(texts[1:], units[1:], strict=True)):
            timed: list[tuple[str, Callable[[], Any]]] = [
                (f"vector: {name}", functools.partial(in_thread, form, u)) for name, form in vector_forms.items()
            ]
            timed += [
                (f"full text: {name}", functools.partial(in_thread, form, q)) for name, form in keyword_forms.items()
            ]
            timed += [
                ("both at once, under the view (the store's)", functools.partial(both, today, keyword, q, u)),
                ("both at once, unfiltered", functools.partial(both, unfiltered_vector, unfiltered_keyword, q, u)),
                ("vector alone, unfiltered", functools.partial(in_thread, unfiltered_vector, u)),
                ("full text alone, unfiltered", functools.partial(in_thread, unfiltered_keyword, q)),
            ]
            shift = i % len(timed)
            results = {}
            for name, run in timed[shift:] + timed[:shift]:
                started = time.perf_counter()
                results[name] = await run()
                spent[name].append((time.perf_counter() - started) * 1000)
            if len(passes) == 0:
                for name in vector_forms:
                    rows = results[f"vector: {name}"]
                    ids = rows if isinstance(rows, list) else _ids(rows)
                    recall[name].append(len(set(ids[:10]) & truths[i]) / 10)
                reference = _ids(results["full text: the store's: allowlist"])
                for name in keyword_forms:
                    table = results[f"full text: {name}"]
                    head = _visible_head(table, prefilter.passes, ROWS)
                    kept[name] += head == reference
                    overlap[name].append(len(set(head) & set(reference)) / max(len(reference), 1))
        passes.append({name: statistics.median(ms) for name, ms in spent.items()})
        corpus = kb.corpus()  # the whole search's phases, unfiltered and under the view (bench/_search_phases.py)
        split.append(
            {
                "unfiltered": await phases(kb, corpus, embedder, texts[1:], LIMIT),
                FILTERED: await phases(kb, view, embedder, texts[1:], LIMIT),
            }
        )
    await kb.close()
    return {
        "chunks": plan.rows.total,
        "view_rows": plan.rows.rows,
        "view_ef": view_ef,
        "queries": queries,
        "view_rows_found_ms": found_ms,
        "view_rows_cached_ms": cached_ms,
        "passes_ms": passes,
        "phases_ms": split,
        "vector_recall_at_10": {name: statistics.mean(r) for name, r in recall.items()},
        "keyword_same_rows": dict(kept),
        "keyword_overlap": {name: statistics.mean(o) for name, o in overlap.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", type=Path, default=Path(__file__).resolve().parent / "results" / "rebuild")
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    host = machine()
    result = anyio.run(forms, args.dir / f"synthetic-{args.size}.lancedb", args.queries, args.repeat)
    print(
        f"{result['chunks']:,} chunks, a tenth of the documents passing ({result['view_rows']:,} chunks), "
        f"ef {result['view_ef']} under the view; medians of {args.queries} queries per pass, {args.repeat} passes"
    )
    print(
        f"  the view's rows found: {result['view_rows_found_ms']:.0f} ms, again (cached): "
        f"{result['view_rows_cached_ms']:.2f} ms"
    )
    names = list(result["passes_ms"][0])
    for name in names:
        values = ", ".join(f"{p[name]:6.1f}" for p in result["passes_ms"])
        form = name.split(": ", 1)[-1]
        extra = ""
        if name.startswith("vector: "):
            extra = f"  recall@10 {result['vector_recall_at_10'][form]:.3f}"
        elif name.startswith("full text: "):
            same, overlap = result["keyword_same_rows"][form], result["keyword_overlap"][form]
            extra = f"  the allowlist's 50 rows in order in {same} of {args.queries}, as a set {overlap:.3f}"
        print(f"  {name:>72} {values} ms{extra}")
    print("  the whole search's phases (bench/_search_phases.py), medians per pass: unfiltered / a tenth passes")
    for name in [*PHASES, "rest (embed, visible, shaping)", "total"]:
        values = ", ".join(f"{p['unfiltered'][name]:5.1f} / {p[FILTERED][name]:5.1f}" for p in result["phases_ms"])
        print(f"  {name:>40} {values} ms")
    print(f"{describe()}; load at the start {host['load_1_5_15']}, at the end {machine()['load_1_5_15']}")
    print(json.dumps({"bench": "view_forms", "machine": host, **result}))


if __name__ == "__main__":
    main()
