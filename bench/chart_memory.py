"""Server memory under the wide-spec chart attack: specs bounded in bytes (charts.max_spec_kb).

Starts `mcp-analysis serve --http` (the sample knowledge base, or `--db`), then --clients clients
at once each run `await chart(spec)` on a spec of 5,000 rows sharing one dict of 36 fields of
1,000 characters: a few KB in the sandbox, 180 MB as JSON. Before specs were bounded in bytes,
two such calls took a server from 347 MB to 1,606 MB and the renderer died ("exit -6"); with
`charts.max_spec_kb` the sandbox refuses the spec before it leaves. Prints what each call
returned; the server's RSS (sampled every 50 ms) after a first small chart (the start), at its
peak and 5 s after; and the renderer's peak. `--repo DIR` runs the server from another checkout
(`git archive REV | tar -x -C DIR`) with this checkout's environment, to measure the code before
a change. `--host-call` sends the spec to the host's `_mcp_chart` directly, as an interpreter state
saved without the prelude does: the server's own check.

    .venv/bin/python bench/chart_memory.py [--clients 2] [--db PATH] [--repo DIR] [--host-call]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import psutil
from _machine import describe, machine
from _serving import wait_listening
from reliability import client_for

MB = 1024 * 1024
REPO = Path(__file__).resolve().parent.parent
ATTACK = """
row = {('k' + str(j)): ('x' * 999 + str(j % 10)) for j in range(36)}
rows = [row] * 5000
await CHART({'data': {'values': rows}, 'mark': 'point', 'encoding': {'x': {'field': 'k0', 'type': 'nominal'}}})
"""
WARM = "await chart({'data': {'values': [{'a': 1}]}, 'mark': 'point'})"


def start_server(args: argparse.Namespace, workdir: Path, port: int) -> subprocess.Popen[bytes]:
    where = ["--db", args.db] if args.db else ["--sample"]
    env = {**os.environ, "XDG_DATA_HOME": str(workdir / "data"), "MCP_ANALYSIS_SERVER__LOG_LEVEL": "WARNING"}
    with open(workdir / "server.log", "ab") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "mcp_analysis", *where, "serve", "--http", "--port", str(port)],
            cwd=args.repo or REPO,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    why = wait_listening(process, port, 600)
    if why is not None:
        raise SystemExit(f"server did not start ({why}):\n{(workdir / 'server.log').read_text()[-3000:]}")
    return process


class Sampler:
    """Peak RSS of the server and of its renderer child, sampled until stopped."""

    def __init__(self, server: psutil.Process) -> None:
        self.server = server
        self.peak = 0
        self.renderer_peak = 0
        self.running = True

    async def run(self) -> None:
        while self.running:
            try:
                self.peak = max(self.peak, self.server.memory_info().rss)
                for child in self.server.children(recursive=True):
                    if "mcp_analysis.charts.worker" in " ".join(child.cmdline()):
                        self.renderer_peak = max(self.renderer_peak, child.memory_info().rss)
            except psutil.Error:
                pass
            await anyio.sleep(0.05)


async def main(args: argparse.Namespace) -> dict[str, Any]:
    host = machine()
    workdir = Path(tempfile.mkdtemp(prefix="mcp-analysis-chart-memory-"))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    process = start_server(args, workdir, port)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        async with client_for(url, "auto") as client:  # warm: the knowledge base, a worker, the renderer
            await client.call_tool("execute_code", {"code": WARM})
        server = psutil.Process(process.pid)
        start = server.memory_info().rss
        sampler = Sampler(server)
        said: list[str] = [""] * args.clients
        started = time.monotonic()

        async def attack(n: int) -> None:
            async with client_for(url, "auto") as client:
                code = ATTACK.replace("CHART", "_mcp_chart" if args.host_call else "chart")
                result = await client.call_tool("execute_code", {"code": code})
                out = result.structured_content or {}
                error = (out.get("error") or "").strip().splitlines()
                said[n] = error[-1] if error else f"drew {len(out.get('charts', []))} chart(s)"

        async with anyio.create_task_group() as tg:
            tg.start_soon(sampler.run)
            async with anyio.create_task_group() as clients:
                for n in range(args.clients):
                    clients.start_soon(attack, n)
            seconds = time.monotonic() - started
            await anyio.sleep(5)
            sampler.running = False
        after = server.memory_info().rss
    finally:
        process.terminate()
        process.wait(timeout=30)
    report = {
        "bench": "chart_memory",
        "machine": host,
        "repo": str(args.repo or REPO),
        "clients": args.clients,
        "host_call": args.host_call,
        "seconds": round(seconds, 1),
        "server_rss_mb": {"start": start // MB, "peak": sampler.peak // MB, "after_5s": after // MB},
        "renderer_peak_mb": sampler.renderer_peak // MB,
        "calls": said,
    }
    rss = report["server_rss_mb"]
    for n, line in enumerate(said):
        print(f"call {n + 1}: {line[:200]}")
    print(
        f"{args.clients} wide-spec charts at once, {report['seconds']} s: server RSS {rss['start']:,} -> peak "
        f"{rss['peak']:,} MB, {rss['after_5s']:,} MB 5 s after; renderer peak {report['renderer_peak_mb']:,} MB"
    )
    print(describe() + f"; load at the end {list(os.getloadavg())}")
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument("--db", help="knowledge base (default: the sample, built on first use)")
    parser.add_argument(
        "--host-call", action="store_true", help="call the host's _mcp_chart directly (a state without the prelude)"
    )
    parser.add_argument("--repo", type=Path, help="run the server from this checkout (default: this one)")
    anyio.run(main, parser.parse_args())
