"""Context economy: how many characters each tool result costs the host model, and whether
search still finds (and shows) the answer.

Two servers run side by side in the same run, over stdio, each on a knowledge base built by
its own code: "today" is the baseline commit (checked out in a temporary `git worktree`,
run with this venv), "new" is this working tree.

- A labeled query set (bench/data/context_queries.json): 45 natural queries over 51 real
  manuals and READMEs written by the authors of packages we depend on (written out of the
  installed packages at bench time, sha256-checked). For `search` (limit 5): hit@1, hit@5,
  MRR by document, "answer shown@5" (a relevant hit's text as the model sees it contains the
  answer phrase), and characters per result.
- Per tool: median and p95 characters of the text content, the structured content
  (`json.dumps(..., ensure_ascii=False)`) and both together; tools/list size.
- A scripted analysis session per seed question type on the sample knowledge base (count
  documents mentioning X, average a figure across reports, compare two documents, extract and
  total amounts): the characters the model would read (text; and text + structured).

    python bench/context.py [--baseline fcb295f] [--out bench/results] [--rebuild]

Targets: search median text <= 6,000 and text + structured <= 12,000 characters,
hit@5 and MRR not lower than the baseline's; tools/list at most 10% larger.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
from _machine import describe, machine
from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "bench" / "data" / "context_queries.json"
TOOLS = ("search", "list_documents", "execute_code", "cite", "analysis_state", "new_analysis")


# ----------------------------------------------------------------------------- corpus


def document_text(spec: dict[str, str]) -> str:
    if "readme" in spec:
        metadata = importlib.metadata.distribution(spec["readme"]).metadata
        return str(metadata.get_payload() or metadata.get("Description") or "")
    package, _, rel = spec["file"].partition("/")
    found = importlib.util.find_spec(package)
    if found is None or not found.submodule_search_locations:
        raise SystemExit(f"package {package!r} is not installed: run `uv sync`")
    return (Path(next(iter(found.submodule_search_locations))) / rel).read_text(encoding="utf-8")


def write_corpus(spec: dict[str, Any], target: Path) -> tuple[str, list[str]]:
    """Write the documents; return a digest of the corpus and the names whose sha256 drifted."""
    target.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    drifted = []
    for doc in spec["documents"]:
        text = document_text(doc)
        sha = hashlib.sha256(text.encode()).hexdigest()
        if doc.get("sha256") and doc["sha256"] != sha:
            drifted.append(doc["name"])
        digest.update(doc["name"].encode() + sha.encode())
        path = target / doc["name"]
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
    return digest.hexdigest()[:16], drifted


def code_digest(code: Path) -> str:
    """What decides a knowledge base's contents: the ingest, store and embed code."""
    digest = hashlib.sha256()
    package = code / "mcp_analysis"
    for path in [
        package / "structure.py",
        *(p for sub in ("ingest", "store", "embed") for p in sorted((package / sub).rglob("*.py"))),
    ]:
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def side_env(code: Path, work: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(code),
        "XDG_DATA_HOME": str(work / "data"),
        "MCP_ANALYSIS_SESSIONS__DIR": str(work / "sessions"),
    }


def build_kb(code: Path, sources: Path, db: Path, work: Path, rebuild: bool) -> None:
    if db.exists() and not rebuild:
        return
    subprocess.run(["rm", "-rf", str(db)], check=True)
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "mcp_analysis", "--db", str(db), "add", str(sources)],
        cwd=code,
        env=side_env(code, work),
        check=True,
        stdout=subprocess.DEVNULL,
    )
    print(f"  built {db.name} with {code} in {time.perf_counter() - started:.0f} s", file=sys.stderr)


@contextmanager
def baseline_checkout(rev: str) -> Iterator[Path]:
    subprocess.run(["git", "worktree", "prune"], cwd=ROOT, check=False)  # checkouts of interrupted runs
    path = Path(tempfile.mkdtemp(prefix="mcp-analysis-baseline-")) / "tree"
    subprocess.run(["git", "worktree", "add", "--detach", str(path), rev], cwd=ROOT, check=True, capture_output=True)
    try:
        yield path
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=ROOT, check=False)


# ----------------------------------------------------------------------------- measuring


def sizes(result: Any) -> tuple[int, int]:
    text = sum(len(getattr(block, "text", "")) for block in result.content)
    structured = result.structured_content
    return text, len(json.dumps(structured, ensure_ascii=False)) if structured is not None else 0


def text_of(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


class Recorder:
    """Every tool result's size, per tool; and what a scripted session read."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.per_tool: dict[str, list[tuple[int, int]]] = defaultdict(list)
        self.read: list[tuple[int, int]] = []

    async def call(self, tool: str, args: dict[str, Any]) -> Any:
        result = await self.client.call_tool(tool, args)
        if result.is_error:
            raise RuntimeError(f"{tool}({args}) failed: {text_of(result)[:500]}")
        t, s = sizes(result)
        self.per_tool[tool].append((t, s))
        self.read.append((t, s))
        return result


def hit_ids(result: Any) -> list[str]:
    return [r["chunk_id"] for r in result.structured_content["results"]]


async def document_names(client: Client) -> dict[str, str]:
    """document id -> file name, paging through list_documents."""
    names: dict[str, str] = {}
    offset: int | None = 0
    while offset is not None:
        page = (await client.call_tool("list_documents", {"offset": offset, "limit": 1000})).structured_content
        for doc in page["documents"]:
            names[doc["id"]] = doc["uri"].rsplit("/", 1)[-1]
        offset = page.get("next_offset")
    return names


BARE_WORDS = 3  # a hit whose text besides its headings is at most this many words is a bare heading


def bare_heading(hit: dict[str, Any]) -> bool:
    """A hit whose text is a heading (or headings: a markdown heading line or one of its heading path)
    plus at most BARE_WORDS words."""
    headings = {h.strip() for h in hit.get("headings") or []}
    lines = [ln.strip() for ln in hit["content"].splitlines() if ln.strip()]
    titles = [ln for ln in lines if ln.startswith("#") or ln in headings]
    rest = [ln for ln in lines if ln not in titles]
    return bool(titles) and len(re.findall(r"\w+", " ".join(rest))) <= BARE_WORDS


def squash(text: str) -> str:
    return " ".join(text.lower().split())


def contains_answer(text: str, query: dict[str, Any]) -> bool:
    answers = query["answer"] if isinstance(query["answer"], list) else [query["answer"]]
    return any(squash(a) in squash(text) for a in answers)


def check_labels(spec: dict[str, Any], sources: Path) -> list[str]:
    """Queries none of whose relevant documents contains the answer (a labelling error)."""
    return [
        q["q"]
        for q in spec["queries"]
        if not any(contains_answer((sources / name).read_text(encoding="utf-8"), q) for name in q["relevant"])
    ]


async def query_set(rec: Recorder, spec: dict[str, Any]) -> dict[str, Any]:
    names = await document_names(rec.client)
    hit1 = hit5 = shown = bare = 0
    reciprocal = []
    latencies = []
    sizes = []
    for query in spec["queries"]:
        started = time.perf_counter()
        result = await rec.call("search", {"query": query["q"], "limit": 5})
        latencies.append((time.perf_counter() - started) * 1000)
        hits = result.structured_content["results"]
        bare += sum(bare_heading(h) for h in hits)
        sizes.append(len(text_of(result)))
        relevant = set(query["relevant"])
        ranks = [i for i, h in enumerate(hits, start=1) if names.get(h["document_id"]) in relevant]
        first = ranks[0] if ranks else None
        hit1 += first == 1
        hit5 += first is not None
        reciprocal.append(1 / first if first else 0.0)
        # Is the answer phrase in what the model reads about a relevant hit? Hits are blocks of the
        # text starting with their chunk_id's line; take each relevant hit's block.
        blocks = hit_blocks(text_of(result), [h["chunk_id"] for h in hits])
        shown += any(contains_answer(blocks.get(hits[r - 1]["chunk_id"], ""), query) for r in ranks)
        await rec.call("cite", {"chunk_ids": hit_ids(result)[:3]})
    n = len(spec["queries"])
    return {
        "queries": n,
        "hit@1": hit1 / n,
        "hit@5": hit5 / n,
        "mrr": sum(reciprocal) / n,
        "answer_shown@5": shown / n,
        "bare_headings": bare,
        "text_p50": statistics.median(sizes),
        "search_p50_ms": statistics.median(latencies),
    }


def hit_blocks(text: str, chunk_ids: list[str]) -> dict[str, str]:
    """Split a search result's text into one block per hit (from its chunk_id to the next one's).

    A block starts at the line before the chunk id (the title line) in both renderings.
    """
    positions = []
    for chunk_id in chunk_ids:
        at = text.find(chunk_id)
        if at >= 0:
            positions.append((text.rfind("\n", 0, max(0, text.rfind("\n", 0, at))) + 1, chunk_id))
    positions.sort()
    blocks = {}
    for i, (start, chunk_id) in enumerate(positions):
        end = positions[i + 1][0] if i + 1 < len(positions) else len(text)
        blocks[chunk_id] = text[start:end]
    return blocks


# Scripted sessions on the sample knowledge base: the calls a model makes for each seed question.
COUNT_CODE = """\
from pathlib import Path
import json
mentioning = []
for d in Path('/documents').iterdir():
    if 'vulnerabilit' in (d / 'content.txt').read_text().lower():
        mentioning.append(json.loads((d / 'metadata.json').read_text())['title'])
print(len(mentioning), sorted(mentioning))
"""
AVERAGE_CODE = """\
import re
from pathlib import Path
revenues = {}
for doc in await list_documents():
    if 'Quarterly Financial Report' in doc['title']:
        text = Path('/documents/' + doc['id'] + '/content.txt').read_text()
        m = re.search(r'Total revenue\\s*\\|\\s*\\$([\\d,]+)', text)
        revenues[doc['title']] = int(m.group(1).replace(',', ''))
print(revenues)
sum(revenues.values()) / len(revenues)
"""
COMPARE_CODE = """\
import json
from pathlib import Path
def findings(part):
    for d in Path('/documents').iterdir():
        if part in json.loads((d / 'metadata.json').read_text())['title']:
            toc = json.loads((d / 'toc.json').read_text())
            items = [json.loads(l) for l in (d / 'items.jsonl').read_text().splitlines()]
            def walk(nodes):
                for n in nodes:
                    if n['heading'] == 'Key Findings':
                        lo, hi = n['item_range']
                        return [i['text'] for i in items[lo:hi + 1] if i['label'] == 'list_item']
                    found = walk(n['sections'])
                    if found:
                        return found
            return walk(toc['sections'])
print('A:', findings('Report A'))
print('B:', findings('Report B'))
"""
AMOUNTS_CODE = """\
import re
from pathlib import Path
totals = {}
for doc in await list_documents():
    text = Path('/documents/' + doc['id'] + '/content.txt').read_text()
    amounts = [float(a.replace(',', '')) for a in re.findall(r'\\$([\\d,]+(?:\\.\\d+)?)', text)]
    if amounts:
        totals[doc['title']] = sum(amounts)
for title, total in sorted(totals.items()):
    print(f'{total:>16,.2f}  {title}')
sum(totals.values())
"""


async def sessions(rec: Recorder) -> dict[str, dict[str, int]]:
    out = {}

    async def run(name: str, steps: Any) -> None:
        await rec.call("new_analysis", {})
        rec.read = []
        await steps()
        out[name] = {
            "calls": len(rec.read),
            "text": sum(t for t, _ in rec.read),
            "total": sum(t + s for t, s in rec.read),
        }

    async def count() -> None:
        found = await rec.call("search", {"query": "security vulnerabilities"})
        await rec.call("execute_code", {"code": "print(await search('security vulnerability', limit=10))"})
        await rec.call("execute_code", {"code": COUNT_CODE})
        await rec.call("cite", {"chunk_ids": hit_ids(found)[:3]})

    async def average() -> None:
        await rec.call("list_documents", {})
        found = await rec.call("search", {"query": "total revenue quarterly financial report"})
        await rec.call("execute_code", {"code": AVERAGE_CODE})
        await rec.call("cite", {"chunk_ids": hit_ids(found)[:4]})

    async def compare() -> None:
        a = await rec.call("search", {"query": "Report A key findings"})
        b = await rec.call("search", {"query": "Report B key findings"})
        await rec.call("execute_code", {"code": COMPARE_CODE})
        await rec.call("cite", {"chunk_ids": hit_ids(a)[:1] + hit_ids(b)[:1]})

    async def amounts() -> None:
        await rec.call("execute_code", {"code": "docs = await list_documents()\ndocs"})
        await rec.call("execute_code", {"code": AMOUNTS_CODE})
        found = await rec.call("search", {"query": "contract value dollar amounts"})
        await rec.call("cite", {"chunk_ids": hit_ids(found)[:3]})
        await rec.call("analysis_state", {})

    for name, steps in (("count", count), ("average", average), ("compare", compare), ("amounts", amounts)):
        await run(name, steps)
    return out


async def measure_side(code: Path, corpus_db: Path, sample_db: Path, spec: dict[str, Any], work: Path) -> dict:
    env = side_env(code, work)
    base = [sys.executable, "-m", "mcp_analysis"]
    corpus = StdioServerParameters(
        command=base[0], args=[*base[1:], "--db", str(corpus_db), "serve"], env=env, cwd=str(code)
    )
    sample = StdioServerParameters(
        command=base[0], args=[*base[1:], "--db", str(sample_db), "serve"], env=env, cwd=str(code)
    )
    async with Client(corpus) as client:
        tools = await client.list_tools()
        tools_json = json.dumps(
            tools.model_dump(mode="json", by_alias=True, exclude_none=True)["tools"], ensure_ascii=False
        )
        rec = Recorder(client)
        quality = await query_set(rec, spec)
        await rec.call("list_documents", {})
        await rec.call("analysis_state", {})
        await rec.call("new_analysis", {})
        corpus_calls = dict(rec.per_tool)
    async with Client(sample) as client:
        rec = Recorder(client)
        scripted = await sessions(rec)
        for tool, samples in rec.per_tool.items():
            corpus_calls.setdefault(tool, []).extend(samples)
    return {
        "tools_list_chars": len(tools_json),
        "tool_descriptions_chars": sum(len(t.description or "") for t in tools.tools),
        "quality": quality,
        "per_tool": {tool: stats(samples) for tool, samples in corpus_calls.items()},
        "sessions": scripted,
    }


def stats(samples: list[tuple[int, int]]) -> dict[str, float]:
    def pct(values: list[int], q: float) -> float:
        ordered = sorted(values)
        return float(ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))])

    texts = [t for t, _ in samples]
    structured = [s for _, s in samples]
    totals = [t + s for t, s in samples]
    return {
        "n": len(samples),
        "text_p50": statistics.median(texts),
        "text_p95": pct(texts, 95),
        "structured_p50": statistics.median(structured),
        "structured_p95": pct(structured, 95),
        "total_p50": statistics.median(totals),
        "total_p95": pct(totals, 95),
        "total_max": max(totals),
    }


# ----------------------------------------------------------------------------- report


def report(r: dict[str, Any]) -> None:
    today, new = r["today"], r["new"]
    print(f"\nlabeled queries: {today['quality']['queries']} over {r['documents']} documents (search, limit 5)")
    print(f"{'':<22}{'today':>10}{'new':>10}")
    for key in ("hit@1", "hit@5", "mrr", "answer_shown@5", "bare_headings", "text_p50", "search_p50_ms"):
        a, b = today["quality"].get(key, float("nan")), new["quality"][key]
        print(f"{key:<22}{a:>10.3f}{b:>10.3f}")
    print(
        f"{'tools/list chars':<22}{today['tools_list_chars']:>10}{new['tools_list_chars']:>10}"
        f"   ({new['tools_list_chars'] / today['tools_list_chars'] - 1:+.1%})"
    )
    print("\ncharacters per tool result (p50 / p95): today -> new")
    print(f"{'tool':<16}{'n':>4}  {'text':>24}  {'structured':>24}  {'total':>24}")
    for tool in TOOLS:
        if tool not in today["per_tool"] or tool not in new["per_tool"]:
            continue
        a, b = today["per_tool"][tool], new["per_tool"][tool]
        cells = [
            f"{a[k + '_p50']:>6.0f}/{a[k + '_p95']:<5.0f}->{b[k + '_p50']:>6.0f}/{b[k + '_p95']:<5.0f}"
            for k in ("text", "structured", "total")
        ]
        print(f"{tool:<16}{b['n']:>4}  " + "  ".join(cells))
    print("\nscripted sessions on the sample knowledge base: characters the model reads")
    print(
        f"{'session':<10}{'calls':>6}{'text today':>13}{'text new':>10}{'ratio':>7}{'total today':>13}{'total new':>10}"
    )
    for name, a in today["sessions"].items():
        b = new["sessions"][name]
        print(
            f"{name:<10}{b['calls']:>6}{a['text']:>13,}{b['text']:>10,}{b['text'] / a['text']:>7.2f}"
            f"{a['total']:>13,}{b['total']:>10,}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", default="fcb295f", help="git revision measured as 'today'")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--rebuild", action="store_true", help="rebuild the cached knowledge bases")
    args = parser.parse_args()
    host = machine()

    spec = json.loads(DATA.read_text())
    cache = args.out / "context"
    sources = cache / "corpus"
    corpus_digest, drifted = write_corpus(spec, sources)
    if drifted:
        print(f"warning: installed versions differ from the labelled ones for {drifted}", file=sys.stderr)
    if unanswered := check_labels(spec, sources):
        print(f"warning: no relevant document contains the answer of {unanswered}", file=sys.stderr)
    r: dict[str, Any] = {"documents": len(spec["documents"]), "corpus": corpus_digest, "baseline": args.baseline}
    with baseline_checkout(args.baseline) as baseline:
        for side, code in (("today", baseline), ("new", ROOT)):
            work = cache / side
            key = code_digest(code)
            corpus_db = work / f"corpus-{corpus_digest}-{key}.lancedb"
            sample_db = work / f"sample-{key}.lancedb"
            build_kb(code, sources, corpus_db, work, args.rebuild)
            build_kb(code, code / "mcp_analysis" / "sample" / "documents", sample_db, work, args.rebuild)
            r[side] = anyio.run(measure_side, code, corpus_db, sample_db, spec, work)
    r["load"] = os.getloadavg()
    report(r)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"context-{time.strftime('%Y%m%d-%H%M%S')}.json").write_text(json.dumps(r, indent=2))
    print(f"{describe()}; load at the end {machine()['load_1_5_15']}")
    print(json.dumps({"bench": "context", "machine": host, **r}))


if __name__ == "__main__":
    main()
