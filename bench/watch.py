"""Watch latency: a file saved in a watched folder -> searchable through a real MCP client.

A real `serve --http --watch DIR` process on a new knowledge base; each round writes one
file (new files and changes to existing ones, alternating) holding a made-up word, then
polls `search` every 0.1 s until a hit contains that word. Baseline, measured in the same
run on the same server: the way without a watcher, running `mcp-analysis add FILE` after
saving (a new process each time) and waiting until the server finds the word.

    python bench/watch.py [--changes 50] [--baseline 10]
Target: p95 of the watcher well under the `add` baseline's p50 (the watcher skips a process
start and model load per change); the floor is watch.debounce_seconds + watch.settle_seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import statistics
import string
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from _machine import describe, machine  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def word(rng: random.Random) -> str:
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(12))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def found(client: Client, token: str) -> bool:
    hits = (await client.call_tool("search", {"query": token})).structured_content["results"]
    return any(token in hit["content"] for hit in hits)


async def until_found(client: Client, token: str, started: float, timeout: float = 120) -> float:
    with anyio.fail_after(timeout):
        while True:
            if await found(client, token):
                return time.perf_counter() - started
            await anyio.sleep(0.1)


def write_note(path: Path, token: str, n: int) -> None:
    path.write_text(f"# Note {n}\n\nThe field log of round {n} mentions {token} twice: {token}.\n")


async def measure(url: str, folder: Path, outside: Path, env: dict[str, str], db: Path, args: Any) -> dict[str, Any]:
    rng = random.Random(7)
    http = httpx2.AsyncClient(timeout=httpx2.Timeout(120.0))
    async with Client(streamable_http_client(url, http_client=http)) as client:
        await until_found(client, "seedword", time.perf_counter(), timeout=300)  # the start-up mirror is done
        watched = []
        for n in range(args.changes):
            token = word(rng)
            target = folder / (f"new-{n}.md" if n % 2 == 0 else f"new-{n - 1}.md")  # odd rounds change a file
            started = time.perf_counter()
            write_note(target, token, n)
            watched.append(await until_found(client, token, started))
        baseline = []
        for n in range(args.baseline):
            token = word(rng)
            target = outside / f"add-{n}.md"
            started = time.perf_counter()
            write_note(target, token, n)
            await anyio.run_process(
                [sys.executable, "-m", "mcp_analysis", "--db", str(db), "add", str(target)], cwd=ROOT, env=env
            )
            baseline.append(await until_found(client, token, started))
    return {"watch": watched, "add": baseline}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--changes", type=int, default=50)
    parser.add_argument("--baseline", type=int, default=10)
    args = parser.parse_args()
    load_before = machine()["load_1_5_15"]
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        folder, outside, db = base / "folder", base / "outside", base / "kb.lancedb"
        folder.mkdir()
        outside.mkdir()
        (folder / "seed.md").write_text("# Seed\n\nThe seedword note starts the knowledge base.\n")
        env = {**os.environ, "XDG_DATA_HOME": str(base / "data")}
        port = free_port()
        serve = ["serve", "--http", "--port", str(port), "--watch", str(folder)]
        command = [sys.executable, "-m", "mcp_analysis", "--db", str(db), *serve]
        with open(base / "server.log", "wb") as log:
            server = subprocess.Popen(
                command,
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        try:
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    time.sleep(0.2)
            result = anyio.run(measure, f"http://127.0.0.1:{port}/mcp", folder, outside, env, db, args)
        finally:
            server.terminate()
            server.wait(15)
    rows = []
    for name, values in (("watch (serve --watch)", result["watch"]), ("baseline (save + add)", result["add"])):
        rows.append(
            {
                "path": name,
                "n": len(values),
                "p50_s": round(statistics.median(values), 3),
                "p95_s": round(percentile(values, 0.95), 3),
                "min_s": round(min(values), 3),
                "max_s": round(max(values), 3),
            }
        )
    ratio = rows[1]["p50_s"] / rows[0]["p50_s"]
    print(f"{'path':24} {'n':>3} {'p50 s':>7} {'p95 s':>7} {'min s':>7} {'max s':>7}")
    for r in rows:
        print(f"{r['path']:24} {r['n']:>3} {r['p50_s']:>7} {r['p95_s']:>7} {r['min_s']:>7} {r['max_s']:>7}")
    load_after = machine()["load_1_5_15"]
    print(f"baseline p50 / watch p50 = {ratio:.1f}x; {describe()}; load before {load_before}, after {load_after}")
    summary = {"bench": "watch", "rows": rows, "ratio_p50": round(ratio, 2), "load": [load_before, load_after]}
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
