"""The MCP server end to end: cold start, round trips, concurrency, memory.

Baseline, measured in the same run: a bare `mcp` MCPServer with one trivial tool, over
the same transports (the floor any MCP server pays).

    python bench/server.py [--calls 200] [--clients 50] [--sessions 200]
Targets (2 cores): cold start to tools/list <= 1.5 s; trivial execute_code / list_documents
p50 <= 3 ms in memory, <= 10 ms over HTTP on loopback; 50 concurrent HTTP clients: 0 errors.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import psutil
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _machine import describe, machine  # noqa: E402
from _serving import wait_listening  # noqa: E402

from mcp_analysis.config import load_settings  # noqa: E402
from mcp_analysis.sample import documents_dir, ensure_sample_kb  # noqa: E402

BARE = '''
import sys
from mcp.server import MCPServer
mcp = MCPServer("bare")

@mcp.tool()
def ping(x: int = 1) -> int:
    """Echo."""
    return x

if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        mcp.run("streamable-http", port=int(sys.argv[2]), stateless_http=True)
    else:
        mcp.run()
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]


@contextmanager
def process(args: list[str], port: int, env: dict[str, str]) -> Any:
    proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if wait_listening(proc, port, 60) is not None:
            raise RuntimeError(f"server did not start: {args}")
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def http_client(url: str) -> Client:
    return Client(streamable_http_client(url, http_client=httpx2.AsyncClient(timeout=120)))


async def cold_start(params: StdioServerParameters, runs: int) -> float:
    return statistics.median((await startup_times(params, runs))["tools_list_s"])


async def startup_times(params: StdioServerParameters, runs: int) -> dict[str, list[float]]:
    """Seconds from spawning the server to the handshake (initialize) and to a tools/list answer."""
    handshake, tools = [], []
    for _ in range(runs):
        t = time.perf_counter()
        async with Client(params) as client:
            handshake.append(time.perf_counter() - t)
            await client.list_tools()
            tools.append(time.perf_counter() - t)
    return {"initialize_s": handshake, "tools_list_s": tools}


def startup_comparison(params: dict[str, StdioServerParameters], runs: int) -> dict[str, dict[str, list[float]]]:
    """The same servers started in turn, `runs` rounds, so machine noise hits each alike."""
    results: dict[str, dict[str, list[float]]] = {name: {"initialize_s": [], "tools_list_s": []} for name in params}
    for _ in range(runs):
        for name, p in params.items():
            one = anyio.run(startup_times, p, 1)
            for key, values in one.items():
                results[name][key] += values
    return results


async def round_trips(client: Client, tool: str, args: dict[str, Any], calls: int) -> float:
    await client.call_tool(tool, args)
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        result = await client.call_tool(tool, args)
        times.append((time.perf_counter() - t) * 1000)
        assert not result.is_error, result
    return statistics.median(times)


async def ours_round_trips(client: Client, calls: int) -> dict[str, float]:
    first = await client.call_tool("execute_code", {"code": "x = 1"})
    handle = {"session": first.structured_content["session"]}
    return {
        "execute": await round_trips(client, "execute_code", {"code": "x + 1", **handle}, calls),
        "list_documents": await round_trips(client, "list_documents", handle, calls),
    }


async def concurrency(url: str, clients: int, ops: int) -> dict[str, float]:
    latencies: list[float] = []
    errors = 0

    async def worker(n: int) -> None:
        nonlocal errors
        async with http_client(url) as client:
            first = await client.call_tool("execute_code", {"code": f"n = {n}"})
            handle = first.structured_content["session"]
            for i in range(ops):
                t = time.perf_counter()
                if i % 2:
                    r = await client.call_tool("search", {"query": f"revenue quarter {i}", "session": handle})
                else:
                    r = await client.call_tool("execute_code", {"code": "n * 2", "session": handle})
                    if r.structured_content.get("value") != str(2 * n):
                        errors += 1
                latencies.append((time.perf_counter() - t) * 1000)
                errors += int(r.is_error)

    t = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for n in range(clients):
            tg.start_soon(worker, n)
    seconds = time.perf_counter() - t
    return {
        "ops": float(len(latencies)),
        "ops_per_s": len(latencies) / seconds,
        "p50_ms": statistics.median(latencies),
        "p95_ms": p(latencies, 95),
        "errors": float(errors),
    }


async def idle_sessions(url: str, n: int) -> None:
    async with http_client(url) as client:
        for i in range(n):
            await client.call_tool("execute_code", {"code": f"mine = {i}\nrows = list(range(1000))"})


def tree_rss_mb(pid: int) -> float:
    proc = psutil.Process(pid)
    return (proc.memory_info().rss + sum(c.memory_info().rss for c in proc.children(recursive=True))) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--ops", type=int, default=10)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument(
        "--startup-only",
        action="store_true",
        help="Only compare start-up: `--db DB serve`, `--sample serve` (built) and a bare MCPServer.",
    )
    parser.add_argument("--runs", type=int, default=5, help="Start-ups per server (with --startup-only).")
    args = parser.parse_args()
    host = machine()
    logging.basicConfig(level=logging.WARNING)

    work = Path(tempfile.mkdtemp(prefix="mcp-analysis-bench-"))
    env = {**os.environ, "XDG_DATA_HOME": str(work / "data")}
    db = work / "sample.lancedb"
    settings = load_settings(db=db)
    anyio.run(ensure_sample_kb, settings)
    bare = work / "bare_server.py"
    bare.write_text(BARE)
    python = sys.executable
    ours_stdio = StdioServerParameters(
        command=python, args=["-m", "mcp_analysis", "--db", str(db), "serve"], env=env, cwd=str(ROOT)
    )
    bare_stdio = StdioServerParameters(command=python, args=[str(bare)], env=env, cwd=str(ROOT))
    r: dict[str, Any] = {"documents": len(list(documents_dir().iterdir()))}

    if args.startup_only:
        sample_env = {**env, "XDG_DATA_HOME": str(work / "sample-data")}
        sample_db = work / "sample-data" / "mcp-analysis" / "sample.lancedb"
        anyio.run(ensure_sample_kb, load_settings(db=sample_db))
        ours_sample = StdioServerParameters(
            command=python, args=["-m", "mcp_analysis", "--sample", "serve"], env=sample_env, cwd=str(ROOT)
        )
        servers = {"--db DB serve": ours_stdio, "--sample serve": ours_sample, "bare MCPServer": bare_stdio}
        startup = startup_comparison(servers, args.runs)
        print(f"{'server':<16} {'initialize p50 (min-max) s':>28} {'tools/list p50 (min-max) s':>28}")
        for name, times in startup.items():
            cells = [
                f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})"
                for v in (times["initialize_s"], times["tools_list_s"])
            ]
            print(f"{name:<16} {cells[0]:>28} {cells[1]:>28}")
        print(f"{describe()}; load at the end {machine()['load_1_5_15']}")
        print(json.dumps({"bench": "server-startup", "machine": host, "runs": args.runs, "startup": startup}))
        return

    r["cold_start_s"] = anyio.run(cold_start, ours_stdio, 5)
    r["cold_start_bare_s"] = anyio.run(cold_start, bare_stdio, 5)

    async def memory_rt() -> dict[str, float]:
        from mcp_analysis.server.app import create_server

        async with Client(create_server(config=settings)) as client:
            return await ours_round_trips(client, args.calls)

    async def stdio_rt(params: StdioServerParameters, ours: bool) -> dict[str, float]:
        async with Client(params) as client:
            if ours:
                return await ours_round_trips(client, args.calls)
            return {"ping": await round_trips(client, "ping", {"x": 1}, args.calls)}

    async def http_rt(url: str, ours: bool) -> dict[str, float]:
        async with http_client(url) as client:
            if ours:
                return await ours_round_trips(client, args.calls)
            return {"ping": await round_trips(client, "ping", {"x": 1}, args.calls)}

    r["memory"] = anyio.run(memory_rt)
    r["stdio"] = anyio.run(stdio_rt, ours_stdio, True)
    r["stdio_bare"] = anyio.run(stdio_rt, bare_stdio, False)

    port = free_port()
    with process([python, str(bare), "http", str(port)], port, env):
        r["http_bare"] = anyio.run(http_rt, f"http://127.0.0.1:{port}/mcp", False)
    port = free_port()
    ours_http = [python, "-m", "mcp_analysis", "--db", str(db), "serve", "--http", "--port", str(port)]
    with process(ours_http, port, env) as proc:
        url = f"http://127.0.0.1:{port}/mcp"
        r["http"] = anyio.run(http_rt, url, True)
        r["rss_after_start_mb"] = tree_rss_mb(proc.pid)
        r["concurrency"] = anyio.run(concurrency, url, args.clients, args.ops)
        r["rss_after_concurrency_mb"] = tree_rss_mb(proc.pid)
        anyio.run(idle_sessions, url, args.sessions)
        time.sleep(1)
        r["rss_with_idle_sessions_mb"] = tree_rss_mb(proc.pid)
        r["idle_sessions"] = args.sessions

    print(
        f"cold start to tools/list: {r['cold_start_s']:.2f} s (bare MCPServer {r['cold_start_bare_s']:.2f} s, "
        f"{r['cold_start_s'] / r['cold_start_bare_s']:.2f}x)"
    )
    print(f"{'p50 ms':<10} {'execute_code':>13} {'list_documents':>15} {'bare ping':>10}")
    print(f"{'in-memory':<10} {r['memory']['execute']:>13.2f} {r['memory']['list_documents']:>15.2f} {'-':>10}")
    print(
        f"{'stdio':<10} {r['stdio']['execute']:>13.2f} {r['stdio']['list_documents']:>15.2f} "
        f"{r['stdio_bare']['ping']:>10.2f}"
    )
    print(
        f"{'http':<10} {r['http']['execute']:>13.2f} {r['http']['list_documents']:>15.2f} "
        f"{r['http_bare']['ping']:>10.2f}"
    )
    c = r["concurrency"]
    print(
        f"{args.clients} concurrent HTTP clients x {args.ops} ops (search/execute): {c['ops_per_s']:.0f} ops/s, "
        f"p50 {c['p50_ms']:.1f} ms, p95 {c['p95_ms']:.1f} ms, errors {c['errors']:.0f}"
    )
    print(
        f"server RSS (process + workers): {r['rss_after_start_mb']:.0f} MB after start, "
        f"{r['rss_after_concurrency_mb']:.0f} MB after the load, {r['rss_with_idle_sessions_mb']:.0f} MB with "
        f"{args.sessions} more idle sessions"
    )
    print(f"{describe()}; load at the end {machine()['load_1_5_15']}")
    print(json.dumps({"bench": "server", "machine": host, **r}))


if __name__ == "__main__":
    main()
