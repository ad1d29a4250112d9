"""Bytes a kept session's calls write to the directory store, a ~20 MB session against a tiny one.

For each checkout given (this one, and e.g. /work/main as the baseline, in the same run), a real
`serve --http` process of that checkout with its own venv and a fresh `sessions.dir`; one session
holding ~20 MB of distinct text and one holding a small variable; then `--calls` searches and
`--calls` read-only `execute_code` calls on each. Bytes written = the sizes of the files under
`sessions.dir` created or rewritten by the call (inode or mtime changed); latency = the call's
wall time as the client sees it (p50).

    python bench/state_writes.py [--checkout PATH ...] [--calls 20] [--mb 20]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _machine import describe, machine  # noqa: E402

from tests.services import free_port, stop, wait_for_port  # noqa: E402
from tests.session.disk_writes import files as snapshot  # noqa: E402
from tests.session.disk_writes import written  # noqa: E402


async def measure(url: str, sessions: Path, code: str, calls: int) -> dict[str, float]:
    http = httpx2.AsyncClient(timeout=httpx2.Timeout(120.0))
    async with Client(streamable_http_client(url, http_client=http)) as client:
        first = await client.call_tool("execute_code", {"code": code})
        handle = first.structured_content["session"]
        out: dict[str, float] = {}
        for tool, arguments in (
            ("search", {"query": "harbour dredging survey", "session": handle}),
            ("execute_code", {"code": "len(kept)", "session": handle}),
        ):
            sizes, times = [], []
            for _ in range(calls):
                before = snapshot(sessions)
                started = time.perf_counter()
                result = await client.call_tool(tool, arguments)
                times.append(time.perf_counter() - started)
                assert not result.is_error, result
                sizes.append(written(before, snapshot(sessions)))
            out[f"{tool}_bytes_per_call"] = sum(sizes) / calls
            out[f"{tool}_p50_ms"] = statistics.median(times) * 1000
    return out


def run_checkout(checkout: Path, db: Path, work: Path, calls: int, mb: int) -> dict[str, object]:
    sessions = work / "sessions"
    port = free_port()
    env = {**os.environ, "XDG_DATA_HOME": str(work / "data"), "MCP_ANALYSIS_SESSIONS__DIR": str(sessions)}
    env["MCP_ANALYSIS_SANDBOX__MAX_STATE_MB"] = str(mb * 3)
    python = checkout / ".venv" / "bin" / "python"
    log = open(work / "server.log", "wb")  # noqa: SIM115 (closed below)
    process = subprocess.Popen(
        [str(python), "-m", "mcp_analysis", "--db", str(db), "serve", "--http", "--port", str(port)],
        cwd=checkout,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for_port(port, process, 120, "server")
        url = f"http://127.0.0.1:{port}/mcp"
        large = f"kept = [('row %d of the kept table ' % i) * 4 for i in range({mb * 1024 * 1024 // 110})]"
        return {
            "checkout": str(checkout),
            "large": anyio.run(measure, url, sessions, large, calls),
            "tiny": anyio.run(measure, url, sessions, "kept = [1, 2, 3]", calls),
        }
    finally:
        stop(process)
        log.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", type=Path, action="append", help="a checkout with its .venv (repeatable)")
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--mb", type=int, default=20)
    args = parser.parse_args()
    checkouts = args.checkout or [ROOT]
    with tempfile.TemporaryDirectory() as tmp:
        docs = Path(tmp) / "docs"
        docs.mkdir()
        for n in range(5):
            (docs / f"note{n}.md").write_text(f"# Harbour note {n}\n\nThe dredging survey of berth {n} found silt.\n")
        db = Path(tmp) / "kb.lancedb"
        subprocess.run([sys.executable, "-m", "mcp_analysis", "--db", str(db), "add", str(docs)], check=True, cwd=ROOT)
        results = []
        for n, checkout in enumerate(checkouts):
            work = Path(tmp) / f"run{n}"
            work.mkdir()
            results.append(run_checkout(checkout.resolve(), db, work, args.calls, args.mb))
    print(describe(), file=sys.stderr)
    print(json.dumps({"machine": machine(), "calls": args.calls, "mb": args.mb, "results": results}, indent=2))


if __name__ == "__main__":
    main()
