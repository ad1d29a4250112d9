"""Server memory when many anonymous clients each keep large variables (sessions.max_memory_mb).

Starts `mcp-analysis --sample serve --http` (bench/reliability.py's Server) with the given
memory budget, then --clients anonymous 2026-07-28 clients, one after another, each run
`x = 'ab' * N` (a --mb MB string that differs per client) in a session of its own and leave.
Prints the server's RSS after each client, then the /metrics gauges: interpreter state held in
memory, sessions dropped from memory by the budget, live sessions; and the size of the session
directory. Before the budget (and with sessions freed only by the cycle collector) RSS grew by
about --mb per client without end; with it, RSS levels off near start + budget.

    .venv/bin/python bench/session_memory.py                       # 45 clients x 48 MB, default budget (1,024 MB)
    .venv/bin/python bench/session_memory.py --budget-mb 256
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
import psutil
from _machine import describe, machine
from reliability import Server, client_for

MB = 1024 * 1024


def metric(body: str, name: str, scale: float = 1) -> float | None:
    """A gauge or counter from /metrics (None on a server without it: older versions)."""
    for line in body.splitlines():
        if line.startswith(name + " "):
            return round(float(line.rpartition(" ")[2]) / scale, 1)
    return None


async def main(args: argparse.Namespace) -> dict[str, Any]:
    host = machine()
    workdir = Path(tempfile.mkdtemp(prefix="mcp-analysis-session-memory-"))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    if args.budget_mb is not None:  # unset: the server's default (and a server older than the setting runs)
        os.environ["MCP_ANALYSIS_SESSIONS__MAX_MEMORY_MB"] = str(args.budget_mb)
    server = Server(None, workdir / "data", port, workdir / "server.log")
    server.start()
    try:
        assert server.process is not None
        process = psutil.Process(server.process.pid)
        rss_start = process.memory_info().rss // MB
        rss: list[int] = []
        started = time.monotonic()
        half = args.mb * MB // 2
        for n in range(args.clients):
            async with client_for(server.url, "auto") as client:
                result = await client.call_tool("execute_code", {"code": f"x = 'ab' * {half} + '{n}'\nlen(x)"})
                if result.is_error or not result.structured_content["success"]:
                    raise SystemExit(f"client {n}: {result.content[0].text[:300]}")
            rss.append(process.memory_info().rss // MB)
            print(f"client {n + 1:3d}: server RSS {rss[-1]:,} MB", file=sys.stderr)
        seconds = time.monotonic() - started
        body = httpx2.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
        stored = sum(f.stat().st_size for f in (workdir / "data").rglob("*") if f.is_file() and f.suffix == ".bin")
        report = {
            "bench": "session_memory",
            "machine": host,
            "clients": args.clients,
            "state_mb_each": args.mb,
            "budget_mb": args.budget_mb,
            "seconds": round(seconds, 1),
            "server_rss_mb": {"start": rss_start, "peak": max(rss), "end": rss[-1]},
            "rss_mb_after_each": rss,
            "state_in_memory_mb": metric(body, "mcp_analysis_sessions_state_bytes", MB),
            "dropped_from_memory": metric(body, "mcp_analysis_session_memory_evictions_total"),
            "sessions_live": metric(body, "mcp_analysis_sessions_live"),
            "session_store_mb": round(stored / MB, 1),
        }
    finally:
        server.stop()
    r = report
    print(
        f"{r['clients']} clients x {r['state_mb_each']} MB, budget {r['budget_mb'] or 'default'} MB, {r['seconds']} s: "
        f"server RSS {r['server_rss_mb']['start']:,} -> peak {r['server_rss_mb']['peak']:,} / end "
        f"{r['server_rss_mb']['end']:,} MB; state in memory {r['state_in_memory_mb']} MB "
        f"({r['sessions_live']:g} live sessions, {r['dropped_from_memory']} dropped from memory); "
        f"session store {r['session_store_mb']} MB"
    )
    print(describe() + f"; load at the end {list(os.getloadavg())}")
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=45)
    parser.add_argument("--mb", type=int, default=48, help="MB of state each client keeps")
    parser.add_argument("--budget-mb", type=int, help="sessions.max_memory_mb (default: the server's, 1,024)")
    anyio.run(main, parser.parse_args())
