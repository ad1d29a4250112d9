"""Sandbox costs: warm execute, hibernation, a 1,000-document scan, memory of idle sessions.

Baselines, measured in the same run:
- stateless execute with a really fresh interpreter per call: a new monty worker process is
  started, runs the code, and is stopped (what a server that builds a sandbox per call pays);
- a new interpreter state on an already running worker (the cheapest stateless variant).

Memory is the whole server's (this process + its workers) with the embedder loaded, as
`serve` always loads it; the figure without it is printed too.

    python bench/sandbox.py [--calls 300] [--sessions 200]
Targets (2 cores): warm execute p50 <= 1 ms; scan of 1,000 content.txt <= 2 s;
200 idle sessions <= 300 MB RSS for the whole server (server + workers).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import anyio
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import describe, machine
from _synthetic import build, settings_for

from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.sandbox.interpreter import Interpreter
from mcp_analysis.sandbox.pool import WorkerPool
from mcp_analysis.session.analysis import AnalysisSession
from mcp_analysis.session.keys import SessionKey
from mcp_analysis.session.manager import SessionManager

SCAN = """
from pathlib import Path
total = 0
docs = 0
for d in Path('/documents').iterdir():
    total += len((d / 'content.txt').read_text())
    docs += 1
(docs, total)
"""


def rss_mb(process: psutil.Process) -> float:
    total = process.memory_info().rss
    for child in process.children(recursive=True):
        try:
            total += child.memory_info().rss
        except psutil.NoSuchProcess:
            continue
    return total / 1024 / 1024


def p(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q / 100 * len(values)))]


async def run(path: Path, calls: int) -> dict[str, float]:
    settings = settings_for(path, sandbox={"workers": 2}, sessions={"persist": False})
    kb = await KnowledgeBase.open(settings)
    out: dict[str, float] = {}
    async with WorkerPool(settings.sandbox) as pool:
        session = await AnalysisSession(kb, pool=pool).start()
        await session.execute("x = 1")
        warm = []
        for _ in range(calls):
            t = time.perf_counter()
            await session.execute("x + 1")
            warm.append((time.perf_counter() - t) * 1000)
        out["warm_execute_p50_ms"] = statistics.median(warm)
        out["warm_execute_p95_ms"] = p(warm, 95)

        # Stateless, really fresh: a worker process of its own for every call (timed up to the result).
        single = settings.sandbox.model_copy(update={"workers": 1, "idle_release_seconds": 0})
        fresh_process = []
        for _ in range(min(calls, 30)):
            t = time.perf_counter()
            async with WorkerPool(single) as own:
                result = await Interpreter(own, single).execute("1 + 1")
                fresh_process.append((time.perf_counter() - t) * 1000)
                assert result.value == "2", result
        out["fresh_process_execute_p50_ms"] = statistics.median(fresh_process)
        out["ratio_fresh_process_over_warm"] = out["fresh_process_execute_p50_ms"] / out["warm_execute_p50_ms"]

        # Stateless on a running worker: a new, empty interpreter state each call.
        stateless = []
        for _ in range(min(calls, 100)):
            t = time.perf_counter()
            fresh = Interpreter(pool, settings.sandbox)
            await fresh.execute("1 + 1")
            await fresh.hibernate()
            stateless.append((time.perf_counter() - t) * 1000)
        out["new_state_warm_worker_p50_ms"] = statistics.median(stateless)

        # Hibernation: one worker, two sessions taking turns; every call moves a session.
        async with WorkerPool(settings.sandbox.model_copy(update={"workers": 1})) as one:
            for label, setup in (("small", "v = 1"), ("large", "v = ['x' * 100] * 10000\nw = list(range(20000))")):
                a = await AnalysisSession(kb, pool=one).start()
                b = await AnalysisSession(kb, pool=one).start()
                await a.execute(setup)
                await b.execute(setup)
                moves = []
                for i in range(40):
                    s = a if i % 2 else b
                    t = time.perf_counter()
                    await s.execute("len(v)")
                    moves.append((time.perf_counter() - t) * 1000)
                out[f"hibernate_restore_{label}_p50_ms"] = statistics.median(moves)
                out[f"state_{label}_bytes"] = len(a.interpreter_state or b"")
                await a.close()
                await b.close()

        scanner = await AnalysisSession(kb, pool=pool).start()
        t = time.perf_counter()
        result = await scanner.execute(SCAN)
        out["scan_1000_docs_s"] = time.perf_counter() - t
        out["scan_docs"] = float(result.value.strip("()").split(",")[0]) if result.value else -1
        t = time.perf_counter()
        await scanner.execute(SCAN)
        out["scan_1000_docs_warm_s"] = time.perf_counter() - t
        await scanner.close()
        await session.close()

    await kb.close()
    return out


async def memory(path: Path, n_sessions: int) -> dict[str, float]:
    """RSS of a server-like process (run in a fresh process: nothing else loaded before)."""
    settings = settings_for(path, sandbox={"workers": 2}, sessions={"persist": False})
    kb = await KnowledgeBase.open(settings)
    out: dict[str, float] = {}
    process = psutil.Process()
    async with WorkerPool(settings.sandbox) as pool, SessionManager(kb, pool, settings) as manager:
        await (await manager.get(SessionKey.local(), document_filter=None)).execute("0")
        out["rss_without_embedder_mb"] = rss_mb(process)
        await kb.embedder()  # the server loads it at start-up (runtime warm-up)
        await kb.corpus().search("warm up the search path", 3)
        before = rss_mb(process)
        for i in range(n_sessions):
            s = await manager.get(SessionKey.handle(f"bench{i}"), document_filter=None)
            await s.execute(f"mine = {i}\nrows = list(range(1000))\nlabel = 'session {i}'")
        await anyio.sleep(0.5)
        out["rss_before_sessions_mb"] = before
        out["rss_with_idle_sessions_mb"] = rss_mb(process)
        out["sessions"] = float(n_sessions)
        check = await manager.get(SessionKey.handle("bench7"), document_filter=None)
        assert (await check.execute("mine")).value == "7"
    await kb.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--dir", type=Path, default=Path(__file__).resolve().parent / "results")
    parser.add_argument("--memory-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    host = machine()
    path = args.dir / "synthetic-1000docs.lancedb"
    if args.memory_only:
        print(json.dumps(anyio.run(memory, path, args.sessions)))
        return
    anyio.run(build, path, 4000, 4)
    r = anyio.run(run, path, args.calls)
    child = subprocess.run(
        [sys.executable, __file__, "--memory-only", "--sessions", str(args.sessions), "--dir", str(args.dir)],
        capture_output=True,
        text=True,
        check=True,
    )
    r.update(json.loads(child.stdout.splitlines()[-1]))
    print(
        f"warm execute p50 {r['warm_execute_p50_ms']:.2f} ms (p95 {r['warm_execute_p95_ms']:.2f}); "
        f"stateless, fresh worker process per call p50 {r['fresh_process_execute_p50_ms']:.1f} ms "
        f"({r['ratio_fresh_process_over_warm']:.0f}x); new state on a running worker p50 "
        f"{r['new_state_warm_worker_p50_ms']:.2f} ms"
    )
    print(
        f"hibernate+restore per call: small state ({r['state_small_bytes']:.0f} B) "
        f"{r['hibernate_restore_small_p50_ms']:.2f} ms; large state ({r['state_large_bytes'] / 1e3:.0f} KB) "
        f"{r['hibernate_restore_large_p50_ms']:.2f} ms"
    )
    print(
        f"scan of {r['scan_docs']:.0f} content.txt: {r['scan_1000_docs_s']:.2f} s cold, "
        f"{r['scan_1000_docs_warm_s']:.2f} s warm"
    )
    print(
        f"RSS (process + workers, embedder loaded): {r['rss_before_sessions_mb']:.0f} MB before, "
        f"{r['rss_with_idle_sessions_mb']:.0f} MB with {r['sessions']:.0f} idle sessions; "
        f"{r['rss_without_embedder_mb']:.0f} MB before loading the embedder"
    )
    print(f"{describe()}; load at the end {machine()['load_1_5_15']}")
    print(json.dumps({"bench": "sandbox", "machine": host, **r}))


if __name__ == "__main__":
    main()
