"""Reliability run: many real HTTP clients of both protocol eras under faults.

Loopback only, bounded in count and time. Starts `mcp-analysis serve --http` on a free
port (the sample knowledge base unless --db), then:

1. creates --idle sessions (each keeps a variable) and leaves them idle;
2. runs --clients concurrent clients (half 2026-07-28 with session handles, half legacy
   with HTTP sessions) for --duration seconds, each setting a variable once and then
   looping over mixed calls that check it: execute_code, search, cite, list_documents,
   analysis_state;
3. SIGKILLs one interpreter worker at 1/6 of the run, and SIGKILLs the server at 1/3,
   restarting it on the same port and session directory (2026-07-28 clients come back
   to their persisted sessions by handle; legacy clients must initialize a new session);
4. afterwards checks a sample of the idle sessions' variables.

It prints ops, errors (grouped by message, split into fault-caused and unexpected),
p50/p95/p99 per tool, server RSS at start/peak/end, sessions restored, then one JSON line.

    .venv/bin/python bench/reliability.py                      # 100 clients, 60 s, 1,000 idle sessions
    .venv/bin/python bench/reliability.py --clients 20 --duration 20 --idle 100   # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import psutil
from _machine import describe, machine
from _serving import wait_listening
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

REPO = Path(__file__).resolve().parent.parent
QUERIES = ["quarterly revenue", "security vulnerability", "NavCore buffer overflow", "phishing", "sonar", "warranty"]
FAULT_WINDOW = 8.0  # seconds after a fault (server: after it is back) in which failures are the fault's


@dataclass
class Run:
    started: float = field(default_factory=time.monotonic)
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    ops: int = 0
    errors: list[tuple[float, str, str]] = field(default_factory=list)  # (time, tool, message)
    faults: list[tuple[str, float, float]] = field(default_factory=list)  # (kind, start, end)
    state_checks: int = 0
    state_lost: list[tuple[float, str]] = field(default_factory=list)
    restored_after_restart: Counter[str] = field(default_factory=Counter)
    restarts: int = 0
    restart_timing: tuple[float, float] = (0.0, 0.0)  # seconds until listening, until searches work
    timeline: Counter[int] = field(default_factory=Counter)  # ops per 5 s

    def now(self) -> float:
        return time.monotonic() - self.started

    def fault_at(self, moment: float) -> str | None:
        """The latest fault whose window (start .. end + FAULT_WINDOW) holds `moment`."""
        for kind, start, end in reversed(self.faults):
            if start - 0.5 <= moment <= end + FAULT_WINDOW:
                return kind
        return None


class Server:
    def __init__(self, db: str | None, data: Path, port: int, log: Path) -> None:
        self.db, self.data, self.port, self.log = db, data, port, log
        self.process: subprocess.Popen[bytes] | None = None
        self.url = f"http://127.0.0.1:{port}/mcp"

    def start(self) -> None:
        where = ["--db", self.db] if self.db else ["--sample"]
        env = {**os.environ, "XDG_DATA_HOME": str(self.data), "MCP_ANALYSIS_SERVER__LOG_LEVEL": "WARNING"}
        with open(self.log, "ab") as sink:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "mcp_analysis", *where, "serve", "--http", "--port", str(self.port)],
                cwd=REPO,
                env=env,
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
        why = wait_listening(self.process, self.port, 600)
        if why == "exited":
            raise SystemExit(f"server exited:\n{self.log.read_text()[-3000:]}")
        if why == "timeout":
            raise SystemExit("server did not start")

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()

    def rss(self) -> tuple[int, int]:
        """(server process RSS, interpreter workers' RSS) in bytes."""
        if self.process is None or self.process.poll() is not None:
            return 0, 0
        try:
            main = psutil.Process(self.process.pid)
            workers = sum(c.memory_info().rss for c in main.children(recursive=True))
            return main.memory_info().rss, workers
        except psutil.Error:
            return 0, 0

    def worker_pids(self) -> list[int]:
        if self.process is None:
            return []
        try:
            return [c.pid for c in psutil.Process(self.process.pid).children(recursive=True)]
        except psutil.Error:
            return []


def client_for(url: str, mode: str) -> Client:
    http = httpx2.AsyncClient(timeout=httpx2.Timeout(90.0))
    return Client(streamable_http_client(url, http_client=http), mode=mode)


def message_of(result: Any) -> str:
    return " ".join(getattr(block, "text", "") for block in result.content)[:160]


async def call(run: Run, client: Client, tool: str, arguments: dict[str, Any]) -> Any:
    started = time.monotonic()
    result = await client.call_tool(tool, arguments)
    run.latencies[tool].append(time.monotonic() - started)
    run.ops += 1
    run.timeline[int(run.now() // 5)] += 1
    if result.is_error:
        run.errors.append((run.now(), tool, message_of(result)))
    elif tool == "execute_code" and not result.structured_content["success"]:
        run.errors.append((run.now(), tool, (result.structured_content["error"] or "").splitlines()[-1][:160]))
    return result


async def one_client(run: Run, url: str, number: int, mode: str, until: float) -> None:
    rng = random.Random(number)
    handle: dict[str, Any] = {}
    expected = f"'client-{number}'"
    seen_restarts = 0
    while run.now() < until:
        try:
            async with client_for(url, mode) as client:
                if handle and run.restarts > seen_restarts:  # a 2026-07-28 client back after a restart
                    seen_restarts = run.restarts
                    check = await call(run, client, "execute_code", {"code": "mine", **handle})
                    restored = (check.structured_content or {}).get("value") == expected
                    run.restored_after_restart["handle sessions restored" if restored else "handle sessions lost"] += 1
                elif mode == "legacy" and run.restarts > seen_restarts:
                    seen_restarts = run.restarts
                    run.restored_after_restart["legacy clients re-initialized"] += 1
                if not handle or mode == "legacy":
                    first = await call(run, client, "execute_code", {"code": f"mine = {expected}", **handle})
                    if mode != "legacy" and first.structured_content:
                        handle = {"session": first.structured_content["session"]}
                while run.now() < until:
                    check = await call(run, client, "execute_code", {"code": "mine", **handle})
                    run.state_checks += 1
                    if (check.structured_content or {}).get("value") != expected:
                        run.state_lost.append((run.now(), mode))
                        await call(run, client, "execute_code", {"code": f"mine = {expected}", **handle})
                    found = await call(run, client, "search", {"query": rng.choice(QUERIES), "limit": 3, **handle})
                    hits = (found.structured_content or {}).get("results") or []
                    if hits:
                        await call(run, client, "cite", {"chunk_ids": [hits[0]["chunk_id"]], **handle})
                    choice = rng.random()
                    if choice < 0.3:
                        await call(run, client, "list_documents", {"limit": 5, **handle})
                    elif choice < 0.4:
                        await call(run, client, "analysis_state", handle)
                    await anyio.sleep(rng.uniform(0.0, 0.2))
        except Exception as exc:  # transport failure: the server went away; reconnect
            text = f"{type(exc).__name__}: {exc}"
            if isinstance(exc, BaseExceptionGroup):
                leaf: BaseException = exc
                while isinstance(leaf, BaseExceptionGroup):
                    leaf = leaf.exceptions[0]
                text = f"{type(leaf).__name__}: {leaf}"
            run.errors.append((run.now(), "transport", text[:160]))
            await anyio.sleep(0.5)


async def make_idle(url: str, count: int) -> list[str]:
    handles: list[str] = []
    limiter = anyio.Semaphore(16)

    async def one(i: int) -> None:
        async with limiter, client_for(url, "auto") as client:
            result = await client.call_tool("execute_code", {"code": f"idle = {i}"})
            handles.append(f"{result.structured_content['session']}:{i}")

    async with anyio.create_task_group() as tg:
        for i in range(count):
            tg.start_soon(one, i)
    return handles


async def check_idle(url: str, handles: list[str], sample: int) -> tuple[int, int]:
    chosen = random.Random(0).sample(handles, min(sample, len(handles)))
    restored = 0
    async with client_for(url, "auto") as client:
        for entry in chosen:
            handle, value = entry.rsplit(":", 1)
            result = await client.call_tool("execute_code", {"code": "idle", "session": handle})
            restored += (result.structured_content or {}).get("value") == value
    return restored, len(chosen)


async def sample_rss(server: Server, samples: list[tuple[int, int]], stop: anyio.Event) -> None:
    while not stop.is_set():
        samples.append(server.rss())
        await anyio.sleep(0.5)


def percentiles(values: list[float]) -> tuple[float, float, float]:
    if len(values) < 2:
        v = values[0] * 1000 if values else 0.0
        return v, v, v
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return cuts[49] * 1000, cuts[94] * 1000, cuts[98] * 1000


async def main(args: argparse.Namespace) -> dict[str, Any]:
    host = machine()
    workdir = Path(tempfile.mkdtemp(prefix="mcp-analysis-reliability-"))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    server = Server(args.db, workdir / "data", port, workdir / "server.log")
    print(f"server log: {server.log}", file=sys.stderr)
    server.start()
    try:
        rss: list[tuple[int, int]] = []
        async with client_for(server.url, "auto") as warm:  # first search loads the embedder
            await warm.call_tool("search", {"query": "warm up", "limit": 1})
        rss_start = server.rss()
        print(f"creating {args.idle} idle sessions ...", file=sys.stderr)
        idle_started = time.monotonic()
        handles = await make_idle(server.url, args.idle)
        idle_seconds = time.monotonic() - idle_started

        run = Run()
        stop_sampling = anyio.Event()
        until = args.duration

        async def faults() -> None:
            await anyio.sleep(args.duration / 6)
            pids = server.worker_pids()
            if pids:
                start = run.now()
                os.kill(pids[0], signal.SIGKILL)
                run.faults.append(("worker SIGKILL", start, run.now()))
                print(f"t={start:.1f}s: SIGKILLed interpreter worker {pids[0]}", file=sys.stderr)
            await anyio.sleep(args.duration / 6)
            start = run.now()
            run.faults.append(("server restart", start, float("inf")))  # in progress
            server.kill()
            await anyio.to_thread.run_sync(server.start)
            run.restarts += 1  # listening again: clients may come back now
            listening = run.now()
            async with client_for(server.url, "auto") as probe:  # back when a search works again
                await probe.call_tool("search", {"query": "ready", "limit": 1})
            run.faults[-1] = ("server restart", start, run.now())
            run.restart_timing = (round(listening - start, 1), round(run.now() - start, 1))
            print(
                f"t={start:.1f}s: server SIGKILLed, listening after {listening - start:.1f}s, searching after "
                f"{run.now() - start:.1f}s",
                file=sys.stderr,
            )

        print(f"{args.clients} clients for {args.duration:.0f} s ...", file=sys.stderr)
        async with anyio.create_task_group() as tg:
            tg.start_soon(sample_rss, server, rss, stop_sampling)
            tg.start_soon(faults)
            async with anyio.create_task_group() as clients:
                for number in range(args.clients):
                    clients.start_soon(one_client, run, server.url, number, "legacy" if number % 2 else "auto", until)
            stop_sampling.set()
        idle_restored, idle_checked = await check_idle(server.url, handles, args.idle_sample)
        rss_end = server.rss()
    finally:  # also when the run fails or is interrupted: no server left behind
        server.stop()

    fault_errors: Counter[str] = Counter()
    unexpected: Counter[str] = Counter()
    for moment, tool, message in run.errors:
        kind = run.fault_at(moment)
        if kind is not None:
            fault_errors[f"[{kind}] {tool}: {message}"] += 1
        else:
            unexpected[f"{tool}: {message}"] += 1
    lost_unexpected = [moment for moment, _ in run.state_lost if run.fault_at(moment) is None]
    peak = max(rss, key=lambda pair: pair[0], default=(0, 0))
    table = {
        tool: dict(zip(("p50_ms", "p95_ms", "p99_ms"), (round(v, 1) for v in percentiles(values)), strict=True))
        | {"n": len(values)}
        for tool, values in sorted(run.latencies.items())
    }
    result: dict[str, Any] = {
        "clients": args.clients,
        "duration_s": args.duration,
        "idle_sessions": args.idle,
        "idle_create_s": round(idle_seconds, 1),
        "ops": run.ops,
        "ops_per_s": round(run.ops / args.duration, 1),
        "state_checks": run.state_checks,
        "errors_fault_caused": sum(fault_errors.values()),
        "errors_unexpected": sum(unexpected.values()),
        "state_lost_outside_faults": len(lost_unexpected),
        "faults": [(kind, round(start, 1), round(end, 1)) for kind, start, end in run.faults],
        "restart_s": {"listening": run.restart_timing[0], "searching": run.restart_timing[1]},
        "clients_after_restart": dict(run.restored_after_restart),
        "idle_sessions_restored": f"{idle_restored}/{idle_checked}",
        "server_rss_mb": {
            "start": round(rss_start[0] / 2**20),
            "peak": round(peak[0] / 2**20),
            "end": round(rss_end[0] / 2**20),
        },
        "workers_rss_mb_peak": round(max((w for _, w in rss), default=0) / 2**20),
        "latency": table,
        "ops_per_5s": [run.timeline.get(k, 0) for k in range(int(args.duration // 5) + 1)],
    }
    print(f"\nops {run.ops} in {args.duration:.0f} s ({result['ops_per_s']}/s), {run.state_checks} state checks")
    print(f"{'tool':<16}{'n':>7}{'p50 ms':>10}{'p95 ms':>10}{'p99 ms':>10}")
    for tool, row in table.items():
        print(f"{tool:<16}{row['n']:>7}{row['p50_ms']:>10}{row['p95_ms']:>10}{row['p99_ms']:>10}")
    print(f"server RSS MB start/peak/end: {result['server_rss_mb']}  (workers peak {result['workers_rss_mb_peak']} MB)")
    print(f"faults: {result['faults']}; server back: {result['restart_s']}")
    print("ops per 5 s: " + " ".join(f"{k * 5}s:{v}" for k, v in sorted(run.timeline.items())))
    print(f"after the restart: {dict(run.restored_after_restart)}")
    print(f"idle sessions restored: {idle_restored}/{idle_checked}")
    print(f"errors caused by faults: {sum(fault_errors.values())}")
    for message, count in fault_errors.most_common(12):
        print(f"  {count:>5}  {message}")
    print(f"unexpected errors: {sum(unexpected.values())}; state lost outside faults: {len(lost_unexpected)}")
    for message, count in unexpected.most_common(12):
        print(f"  {count:>5}  {message}")
    print(f"{describe()}; load at the end {machine()['load_1_5_15']}")
    print(json.dumps({"bench": "reliability", "machine": host, **result}))
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", help="knowledge base (default: the built-in sample)")
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--idle", type=int, default=1000)
    parser.add_argument("--idle-sample", type=int, default=100)
    # `kill` (SIGTERM) unwinds like Ctrl-C, so the server this run started is stopped too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    anyio.run(main, parser.parse_args())
