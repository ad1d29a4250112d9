"""Sandbox costs: warm execute, hibernation, a 1,000-document scan, memory of idle sessions.

Baseline, measured in the same run: a stateless execute that builds a fresh interpreter
for every call (what peer servers do; the reference MCP server took 25 ms per call).

    python bench/sandbox.py [--calls 300] [--sessions 200]
Targets (2 cores): warm execute p50 <= 1 ms; scan of 1,000 content.txt <= 2 s;
200 idle sessions <= 300 MB RSS for the whole server (server + workers).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import anyio
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _synthetic import build, settings_for

from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.sandbox.interpreter import Interpreter
from mcp_analysis.sandbox.pool import WorkerPool
from mcp_analysis.session.analysis import AnalysisSession
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


async def run(path: Path, calls: int, n_sessions: int) -> dict[str, float]:
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

        stateless = []
        for _ in range(min(calls, 100)):
            t = time.perf_counter()
            fresh = Interpreter(pool, settings.sandbox)
            await fresh.execute("1 + 1")
            await fresh.hibernate()
            stateless.append((time.perf_counter() - t) * 1000)
        out["stateless_execute_p50_ms"] = statistics.median(stateless)
        out["ratio_stateless_over_warm"] = out["stateless_execute_p50_ms"] / out["warm_execute_p50_ms"]

        # Hibernation: one worker, two sessions taking turns; every call moves a session.
        single = settings.sandbox.model_copy(update={"workers": 1})
        async with WorkerPool(single) as one:
            for label, setup in (("small", "v = 1"), ("1MB", "v = ['x' * 100] * 10000\nw = list(range(20000))")):
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

    process = psutil.Process()
    persist = settings.model_copy(update={"sessions": settings.sessions.model_copy(update={"persist": False})})
    async with WorkerPool(settings.sandbox) as pool, SessionManager(kb, pool, persist) as manager:
        await (await manager.get("warmup", document_filter=None)).execute("0")
        before = rss_mb(process)
        for i in range(n_sessions):
            s = await manager.get(f"handle:bench{i}", document_filter=None)
            await s.execute(f"mine = {i}\nrows = list(range(1000))\nlabel = 'session {i}'")
        await anyio.sleep(0.5)
        out["rss_before_sessions_mb"] = before
        out["rss_with_idle_sessions_mb"] = rss_mb(process)
        out["sessions"] = float(n_sessions)
        check = await manager.get("handle:bench7", document_filter=None)
        assert (await check.execute("mine")).value == "7"
    await kb.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--dir", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args()
    path = args.dir / "synthetic-1000docs.lancedb"
    anyio.run(build, path, 4000, 4)
    r = anyio.run(run, path, args.calls, args.sessions)
    print(
        f"warm execute p50 {r['warm_execute_p50_ms']:.2f} ms (p95 {r['warm_execute_p95_ms']:.2f}); "
        f"stateless baseline p50 {r['stateless_execute_p50_ms']:.2f} ms -> {r['ratio_stateless_over_warm']:.1f}x"
    )
    print(
        f"hibernate+restore per call: small state ({r['state_small_bytes']:.0f} B) "
        f"{r['hibernate_restore_small_p50_ms']:.2f} ms; {r['state_1MB_bytes'] / 1e6:.1f} MB state "
        f"{r['hibernate_restore_1MB_p50_ms']:.2f} ms"
    )
    print(
        f"scan of {r['scan_docs']:.0f} content.txt: {r['scan_1000_docs_s']:.2f} s cold, "
        f"{r['scan_1000_docs_warm_s']:.2f} s warm"
    )
    print(
        f"RSS: {r['rss_before_sessions_mb']:.0f} MB before, {r['rss_with_idle_sessions_mb']:.0f} MB with "
        f"{r['sessions']:.0f} idle sessions (server + workers)"
    )
    print(json.dumps({"bench": "sandbox", **r}))


if __name__ == "__main__":
    main()
