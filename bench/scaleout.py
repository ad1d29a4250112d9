"""Scale-out: 1 then 3 replicas behind a round-robin client mix, on S3 (moto) + Redis.

Everything is a real process on loopback: moto's S3 server holding the knowledge base,
redis-server holding the sessions, and `mcp-analysis serve --http` replicas. 100 anonymous
2026-07-28 clients each start a session (`x = N`) and then send every call to the next
replica in turn (no sticky routing): searches, and `x = x + 1` whose value proves the
session continued across replicas. The 1-replica run is the baseline of the 3-replica run.
Then search latency in-process: the same knowledge base on S3 (moto, no network delay)
vs on local disk.

    python bench/scaleout.py [--clients 100] [--rounds 4] [--replicas 1 3] [--queries 40]

On one 2-core machine, 3 replicas share the same 2 cores: the figures show that any replica
continues any session at no error and what a replica costs, not a speed-up (replicas on
separate machines add capacity).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import psutil
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _machine import describe, machine  # noqa: E402

from mcp_analysis.config import load_settings  # noqa: E402
from mcp_analysis.sample import ensure_sample_kb  # noqa: E402
from tests.services import free_port, moto_s3, redis, stop, wait_for_port  # noqa: E402

SECRET = "bench-scaleout-secret-0123456789abcdef"
QUERIES = [
    "average quarterly revenue",
    "phishing campaign",
    "firmware vulnerability",
    "fleet operator survey findings",
    "engineering roadmap milestones",
    "TLS gateway advisory",
    "port authority interviews",
    "security review recommendations",
]


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]


@dataclass
class Replica:
    url: str
    process: subprocess.Popen[bytes]

    def rss_mb(self) -> float:
        """The replica and its interpreter workers."""
        try:
            proc = psutil.Process(self.process.pid)
            total = proc.memory_info().rss + sum(c.memory_info().rss for c in proc.children(recursive=True))
        except psutil.Error:
            return float("nan")
        return total / 1e6


@contextlib.contextmanager
def replicas(count: int, db: str, env: dict[str, str], logs: Path) -> Iterator[list[Replica]]:
    started: list[Replica] = []
    try:
        for n in range(count):
            port = free_port()
            with open(logs / f"replica-{count}-{n}.log", "wb") as sink:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "mcp_analysis", "--db", db, "serve", "--http", "--port", str(port)],
                    cwd=ROOT,
                    env={**os.environ, **env, "XDG_DATA_HOME": str(logs / f"data-{count}-{n}")},
                    stdout=sink,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                )
            started.append(Replica(f"http://127.0.0.1:{port}/mcp", proc))
            wait_for_port(port, proc, 120, f"replica {n}")
        for replica in started:  # ready: knowledge base open, workers up, Redis reachable
            health = replica.url.removesuffix("/mcp") + "/healthz"
            deadline = time.monotonic() + 180
            while httpx2.get(health, timeout=10).status_code != 200:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{health} never became ready")
                time.sleep(0.25)
        yield started
    finally:
        for replica in started:
            stop(replica.process)


@dataclass
class Load:
    latencies: dict[str, list[float]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    continued: int = 0
    continuations: int = 0
    replicas_seen: dict[str, set[int]] = field(default_factory=dict)


async def client_mix(urls: list[str], clients: int, rounds: int) -> tuple[Load, float]:
    load = Load()

    async def call(client: Client, tool: str, args: dict[str, Any]) -> Any:
        started = time.perf_counter()
        try:
            result = await client.call_tool(tool, args)
        except Exception as exc:
            load.errors.append(f"{tool}: {type(exc).__name__}: {exc}")
            return None
        load.latencies.setdefault(tool, []).append((time.perf_counter() - started) * 1000)
        if result.is_error:
            load.errors.append(f"{tool}: {' '.join(getattr(b, 'text', '') for b in result.content)[:200]}")
            return None
        return result.structured_content

    async def one(number: int, limiter: anyio.Semaphore) -> None:
        async with contextlib.AsyncExitStack() as stack:
            connections = []
            for url in urls:  # one connection per replica, as behind a round-robin balancer
                http = httpx2.AsyncClient(timeout=httpx2.Timeout(180.0))
                client = Client(streamable_http_client(url, http_client=http))
                connections.append(await stack.enter_async_context(client))
            turn = number % len(urls)
            async with limiter:
                first = await call(connections[turn], "execute_code", {"code": f"x = {number * 1000}\nx"})
            if first is None:
                return
            handle = first["session"]
            load.replicas_seen[handle] = {turn}
            expected = number * 1000
            for step in range(rounds):
                for tool in ("search", "execute_code"):
                    turn = (turn + 1) % len(urls)
                    load.replicas_seen[handle].add(turn)
                    async with limiter:
                        if tool == "search":
                            query = QUERIES[(number + step) % len(QUERIES)]
                            await call(connections[turn], "search", {"query": query, "limit": 3, "session": handle})
                            continue
                        got = await call(connections[turn], "execute_code", {"code": "x = x + 1\nx", "session": handle})
                    expected += 1
                    load.continuations += 1
                    if got is not None and got.get("value") == str(expected):
                        load.continued += 1
                    elif got is not None:
                        load.errors.append(f"continuity: expected {expected}, got {got.get('value')!r}")
                        expected = int(got.get("value") or expected)

    limiter = anyio.Semaphore(clients)
    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for number in range(clients):
            tg.start_soon(one, number, limiter)
    return load, time.perf_counter() - started


async def search_latency(settings: Any, queries: int) -> dict[str, float]:
    from mcp_analysis.corpus import KnowledgeBase

    opened = time.perf_counter()
    kb = await KnowledgeBase.open(settings)
    corpus = kb.corpus()
    await corpus.documents()
    open_ms = (time.perf_counter() - opened) * 1000
    await (await kb.embedder()).embed_query("warm up")
    first = time.perf_counter()
    await corpus.search(QUERIES[0], 5)
    cold_ms = (time.perf_counter() - first) * 1000
    times = []
    for n in range(queries):
        started = time.perf_counter()
        await corpus.search(QUERIES[n % len(QUERIES)], 5)
        times.append((time.perf_counter() - started) * 1000)
    await kb.close()
    return {"open_ms": open_ms, "first_ms": cold_ms, "p50_ms": pct(times, 50), "p95_ms": pct(times, 95)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=4, help="search + execute_code pairs per client")
    parser.add_argument("--replicas", type=int, nargs="+", default=[1, 3])
    parser.add_argument("--queries", type=int, default=40, help="searches per store for the latency table")
    args = parser.parse_args()
    host = machine()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)

    with tempfile.TemporaryDirectory(prefix="bench-scaleout-") as tmp, contextlib.ExitStack() as stack:
        logs = Path(tmp)
        local_db = logs / "sample.lancedb"
        anyio.run(ensure_sample_kb, load_settings(db=local_db))
        s3 = stack.enter_context(moto_s3(logs))
        redis_port = stack.enter_context(redis(logs))
        db = s3.upload_dir(local_db, "kb")
        env = {
            **s3.env(),
            "MCP_ANALYSIS_SESSIONS__STORE": f"redis://127.0.0.1:{redis_port}/0",
            "MCP_ANALYSIS_SESSIONS__SECRET": SECRET,
        }
        rows: list[dict[str, Any]] = []
        for count in args.replicas:
            with replicas(count, db, env, logs) as started:
                rss_idle = [r.rss_mb() for r in started]
                load, elapsed = anyio.run(client_mix, [r.url for r in started], args.clients, args.rounds)
                rss_after = [r.rss_mb() for r in started]
            calls = sum(len(v) for v in load.latencies.values())
            every = [x for v in load.latencies.values() for x in v]
            spread = [len(seen) for seen in load.replicas_seen.values()]
            rows.append(
                {
                    "replicas": count,
                    "clients": args.clients,
                    "calls": calls,
                    "ops_per_s": calls / elapsed,
                    "p50_ms": pct(every, 50),
                    "p95_ms": pct(every, 95),
                    "search_p50_ms": pct(load.latencies.get("search", []), 50),
                    "execute_p50_ms": pct(load.latencies.get("execute_code", []), 50),
                    "errors": len(load.errors),
                    "continuity_pct": 100.0 * load.continued / max(1, load.continuations),
                    "replicas_per_session": statistics.mean(spread) if spread else 0.0,
                    "rss_idle_mb": rss_idle,
                    "rss_after_mb": rss_after,
                    "first_errors": load.errors[:3],
                }
            )

        for key, value in s3.env().items():
            os.environ[key] = value
        latency = {
            "local disk": anyio.run(search_latency, load_settings(db=str(local_db)), args.queries),
            "S3 (moto)": anyio.run(search_latency, load_settings(db=db), args.queries),
        }

    print(f"\nScale-out, {args.clients} clients, round-robin over the replicas, sessions in Redis, KB on S3 (moto)")
    print(f"{'replicas':>8} {'calls':>6} {'ops/s':>7} {'p50 ms':>7} {'p95 ms':>7} {'errors':>6} "
          f"{'continuity':>10} {'replicas/session':>16}  RSS per replica, idle -> after (MB)")  # fmt: skip
    for row in rows:
        rss = ", ".join(f"{a:.0f} -> {b:.0f}" for a, b in zip(row["rss_idle_mb"], row["rss_after_mb"], strict=True))
        print(
            f"{row['replicas']:>8} {row['calls']:>6} {row['ops_per_s']:>7.1f} {row['p50_ms']:>7.1f} "
            f"{row['p95_ms']:>7.1f} {row['errors']:>6} {row['continuity_pct']:>9.1f}% "
            f"{row['replicas_per_session']:>16.2f}  {rss}"
        )
        for message in row["first_errors"]:
            print(f"         error: {message}")
    if len(rows) > 1:
        print(f"ops/s ratio {rows[-1]['replicas']} vs {rows[0]['replicas']} replica(s): "
              f"{rows[-1]['ops_per_s'] / rows[0]['ops_per_s']:.2f}")  # fmt: skip
    print(f"\nSearch latency, in-process, {args.queries} queries (moto: S3 API on loopback, no network delay)")
    print(f"{'store':>12} {'open ms':>8} {'first ms':>9} {'p50 ms':>7} {'p95 ms':>7}")
    for name, figures in latency.items():
        print(
            f"{name:>12} {figures['open_ms']:>8.1f} {figures['first_ms']:>9.1f} "
            f"{figures['p50_ms']:>7.1f} {figures['p95_ms']:>7.1f}"
        )
    print(f"S3 / local p50: {latency['S3 (moto)']['p50_ms'] / latency['local disk']['p50_ms']:.2f}")
    print(f"{describe()}; load at the end {machine()['load_1_5_15']}")
    print(json.dumps({"bench": "scaleout", "machine": host, "load": rows, "search_latency": latency}))


if __name__ == "__main__":
    main()
