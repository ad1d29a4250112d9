"""Session capacity under hostile clients: who survives, peak memory under concurrency, legacy floods.

Three cases, each on its own `mcp-analysis --db <sample> serve --http` (loopback, free port):

1. *victim*: `sessions.max_sessions` 200. A legacy (2025-era) client sets `victim_total = 12345`;
   another client then opens --attack sessions three ways: sessionless `execute_code` calls (each a
   new kept session), legacy sessions that only `list_documents` and stay open (many addresses),
   legacy `execute_code` sessions from one address. Does the victim still read 12345?
2. *concurrency*: `sessions.max_memory_mb` --budget-mb, --sessions kept sessions of --state-mb each,
   all called at once (`execute_code`, then `analysis_state`). Peak RSS of the server and its
   workers against the idle baseline measured just before, and against the budget.
3. *flood*: --flood bare legacy `initialize` POSTs from one address (never used, never ended), then
   a new legacy client from another address and one from the flooding address after
   `sessions.legacy_unused_ttl_seconds`. RSS per open session is measured too (the baseline is the
   RSS before the flood).

Addresses come from ``X-Forwarded-For``, which uvicorn trusts from loopback (as behind a local
proxy). ``--code DIR`` runs the server from another checkout (e.g. an export of an older commit)
to measure other code; ``--baseline DIR`` runs every case on that checkout first (e.g. an export of
the commit before the bounds), then on --code, and prints the ratios. Settings a checkout does not
have are left out of its environment. Prints a table per checkout, the ratios, then one JSON line.

    .venv/bin/python bench/session_capacity.py
    git archive --prefix=base/ integ2 | tar -x -C /tmp
    .venv/bin/python bench/session_capacity.py --baseline /tmp/base
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
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
MB = 1024 * 1024
LEGACY = "2025-11-25"
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


class Server:
    """One `serve --http` process with `env` over ours, run from `code` (a checkout)."""

    def __init__(self, db: Path, code: Path, workdir: Path, env: dict[str, str]) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = int(sock.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.log = workdir / f"server-{self.port}.log"
        full = {**os.environ, "XDG_DATA_HOME": str(workdir / "data"), "MCP_ANALYSIS_SERVER__LOG_LEVEL": "WARNING"}
        known = (code / "mcp_analysis" / "config.py").read_text()
        # A setting the checkout does not have (a baseline older than it) is left out, not refused at start.
        full.update({f"MCP_ANALYSIS_{k}": str(v) for k, v in env.items() if k.split("__")[-1].lower() in known})
        full["MCP_ANALYSIS_SESSIONS__DIR"] = str(workdir / f"sessions-{self.port}")
        with open(self.log, "wb") as sink:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "mcp_analysis", "--db", str(db), "serve", "--http", "--port", str(self.port)],
                cwd=code,
                env=full,
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
        why = wait_listening(self.process, self.port, 300)
        if why == "exited":
            raise SystemExit(f"server exited:\n{self.log.read_text()[-3000:]}")
        if why == "timeout":
            raise SystemExit("server did not start")

    def rss(self) -> int:
        """RSS of the server and its interpreter workers, in bytes."""
        return sum(self.rss_parts())

    def rss_parts(self) -> tuple[int, int]:
        """(server process, interpreter workers) RSS in bytes."""
        try:
            main = psutil.Process(self.process.pid)
            server = main.memory_info().rss
            workers = 0
            for proc in main.children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    workers += proc.memory_info().rss
        except psutil.Error:
            return 0, 0
        return server, workers

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    @contextlib.contextmanager
    def peak(self) -> Iterator[list[int]]:
        """Yields [peak of the tree, peak of the server process, peak of the workers] (filled on exit)."""
        server, workers = self.rss_parts()
        peak = [server + workers, server, workers]
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                server, workers = self.rss_parts()
                peak[:] = [max(peak[0], server + workers), max(peak[1], server), max(peak[2], workers)]
                time.sleep(0.02)

        thread = threading.Thread(target=sample, daemon=True)
        thread.start()
        try:
            yield peak
        finally:
            done.set()
            thread.join()


def client(server: Server, address: str | None = None, mode: str = "auto") -> Client:
    headers = {"X-Forwarded-For": address} if address else {}
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(180.0))
    return Client(streamable_http_client(server.url, http_client=http), mode=mode)


async def raw_legacy(server: Server, http: httpx2.AsyncClient, address: str, call: dict[str, Any] | None) -> str:
    """initialize (+ one tools/call), left open: "ok" or the first line of why not."""
    headers = {**ACCEPT, "X-Forwarded-For": address}
    init = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}
    try:
        response = await http.post(
            server.url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}, headers=headers
        )
        session = response.headers.get("mcp-session-id")
        if response.status_code != 200 or session is None:
            return f"HTTP {response.status_code}: {_message(response.text)}"
        if call is None:
            return "ok"
        headers.update({"mcp-session-id": session, "mcp-protocol-version": LEGACY})
        await http.post(server.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
        body = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}
        reply = (await http.post(server.url, json=body, headers=headers)).text
    except httpx2.HTTPError as exc:
        return f"{type(exc).__name__}: {exc}"[:160]
    return "ok" if '"isError":false' in reply.replace(" ", "") else _message(reply)


def _message(body: str) -> str:
    for line in [body, *body.splitlines()]:
        text = line.removeprefix("data:").strip()
        with contextlib.suppress(ValueError, AttributeError, TypeError, KeyError, IndexError):
            message = json.loads(text)
            if "error" in message:
                return str(message["error"]["message"])[:160]
            return str(message["result"]["content"][0]["text"])[:160]
    return body[:160]


async def many(count: int, attempt: Any, parallel: int = 16) -> list[str]:
    outcomes: list[str] = [""] * count
    limiter = anyio.Semaphore(parallel)

    async def one(n: int) -> None:
        async with limiter:
            outcomes[n] = await attempt(n)

    async with anyio.create_task_group() as tg:
        for n in range(count):
            tg.start_soon(one, n)
    return outcomes


def tally(outcomes: list[str]) -> dict[str, int]:
    return dict(Counter(o if o == "ok" else o.split(" (")[0][:90] for o in outcomes).most_common(4))


async def victim_case(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    server = Server(args.db, args.code, workdir, {"SESSIONS__MAX_SESSIONS": 200})
    try:
        async with client(server, "10.0.0.1", "legacy") as victim:
            first = await victim.call_tool("execute_code", {"code": "victim_total = 12345"})
            victim_set = "ok" if not first.is_error else _first(first)  # e.g. the server still starting
            async with client(server, "10.0.0.66") as modern:
                sessionless = []
                for n in range(args.attack):
                    result = await modern.call_tool("execute_code", {"code": f"mine = {n}"})
                    sessionless.append("ok" if not result.is_error else _first(result))
            async with httpx2.AsyncClient(timeout=180) as http:
                listing = await many(
                    args.attack,
                    lambda n: raw_legacy(server, http, f"10.1.{n // 250}.{n % 250 + 1}", _tool("list_documents")),
                )
                one_address = await many(args.attack, lambda n: raw_legacy(server, http, "10.0.0.66", _tool("x")))
            read = await victim.call_tool("execute_code", {"code": "victim_total"})
            survived = not read.is_error and read.structured_content.get("value") == "12345"
    finally:
        server.stop()
    return {
        "victim_set": victim_set,
        "victim_survives": survived,
        "victim_reads": "12345" if survived else _first(read) or str(read.structured_content)[:160],
        "sessionless_execute_code": tally(sessionless),
        "legacy_list_documents_many_addresses": tally(listing),
        "legacy_execute_code_one_address": tally(one_address),
    }


def _tool(kind: str) -> dict[str, Any]:
    if kind == "list_documents":
        return {"name": "list_documents", "arguments": {"limit": 1}}
    return {"name": "execute_code", "arguments": {"code": "x = 1"}}


def _first(result: Any) -> str:
    return " ".join(getattr(block, "text", "") for block in result.content)[:160]


async def concurrency_case(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    env = {"SESSIONS__MAX_MEMORY_MB": args.budget_mb, "SANDBOX__WORKERS": args.workers}
    env.update({"SANDBOX__CODE_TIMEOUT": 120, "SANDBOX__CHECKOUT_TIMEOUT": 120})
    server = Server(args.db, args.code, workdir, env)
    figures: dict[str, Any] = {}
    try:
        handles = []
        async with client(server) as setup:
            for n in range(args.sessions):
                code = f"x = 'ab' * {args.state_mb * MB // 2} + '{n}'"
                handles.append((await setup.call_tool("execute_code", {"code": code})).structured_content["session"])
        await anyio.sleep(1)
        baseline_server, baseline_workers = server.rss_parts()
        baseline = baseline_server + baseline_workers
        for tool, arguments in (("execute_code", {"code": "x[-1]"}), ("analysis_state", {})):
            started = time.monotonic()
            with server.peak() as peak:
                outcomes = await all_at_once(server, handles, tool, arguments)
            figures[tool] = {
                "baseline_mb": round(baseline / MB),
                "peak_mb": round(peak[0] / MB),
                "over_baseline_mb": round((peak[0] - baseline) / MB),
                "over_baseline_per_budget": round((peak[0] - baseline) / (args.budget_mb * MB), 2),
                "server_mb_baseline_peak": [round(baseline_server / MB), round(peak[1] / MB)],
                "workers_mb_baseline_peak": [round(baseline_workers / MB), round(peak[2] / MB)],
                "seconds": round(time.monotonic() - started, 1),
                "outcomes": tally(outcomes),
            }
    finally:
        server.stop()
    return figures


async def all_at_once(server: Server, handles: list[str], tool: str, arguments: dict[str, Any]) -> list[str]:
    outcomes: list[str] = [""] * len(handles)
    async with client(server) as caller:

        async def one(n: int) -> None:
            result = await caller.call_tool(tool, {**arguments, "session": handles[n]})
            outcomes[n] = "ok" if not result.is_error else _first(result)

        async with anyio.create_task_group() as tg:
            for n in range(len(handles)):
                tg.start_soon(one, n)
    return outcomes


async def flood_case(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    env = {"SESSIONS__LEGACY_UNUSED_TTL_SECONDS": args.unused_ttl}
    server = Server(args.db, args.code, workdir, env)
    try:
        async with client(server, "10.0.0.9", "legacy") as warm:  # the runtime is up before the baseline
            await warm.call_tool("list_documents", {"limit": 1})
        await anyio.sleep(1)
        before = server.rss()
        started = time.monotonic()
        async with httpx2.AsyncClient(timeout=180) as http:
            outcomes = await many(args.flood, lambda n: raw_legacy(server, http, "10.0.0.66", None))
        seconds = time.monotonic() - started
        opened = outcomes.count("ok")
        after = server.rss()
        other = await _legacy_client_works(server, "10.0.0.2")
        await anyio.sleep(args.unused_ttl + 3)
        same_later = await _legacy_client_works(server, "10.0.0.66")
    finally:
        server.stop()
    return {
        "initializes": args.flood,
        "seconds": round(seconds, 1),
        "outcomes": tally(outcomes),
        "rss_before_mb": round(before / MB),
        "rss_after_mb": round(after / MB),
        "kb_per_open_session": round((after - before) / 1024 / opened, 1) if opened else None,
        "new_client_other_address": other,
        f"flooding_address_after_{args.unused_ttl:g}s": same_later,
    }


async def _legacy_client_works(server: Server, address: str) -> str:
    try:
        with anyio.fail_after(60):
            async with client(server, address, "legacy") as legacy:
                result = await legacy.call_tool("execute_code", {"code": "6 * 7"})
                return "ok" if result.structured_content.get("value") == "42" else _first(result)
    except Exception as exc:  # a refused initialize surfaces as a transport error
        return f"{type(exc).__name__}: {exc}"[:160]


async def run_cases(args: argparse.Namespace, code: Path, workdir: Path) -> dict[str, Any]:
    report: dict[str, Any] = {"code": str(code)}
    here = argparse.Namespace(**{**vars(args), "code": code})
    for name, case in (("victim", victim_case), ("concurrency", concurrency_case), ("flood", flood_case)):
        if name in args.cases:
            print(f"running {name} on {code} ...", file=sys.stderr)
            report[name] = await case(here, workdir)
    return report


async def main(args: argparse.Namespace) -> dict[str, Any]:
    host = machine()
    workdir = Path(tempfile.mkdtemp(prefix="mcp-analysis-session-capacity-"))
    report: dict[str, Any] = {"bench": "session_capacity", "machine": host}
    if args.baseline is not None:
        report["baseline"] = await run_cases(args, args.baseline, workdir)
    report["this"] = await run_cases(args, args.code, workdir)
    report["load_at_end"] = [round(x, 2) for x in os.getloadavg()]
    for label in ("baseline", "this"):
        if label in report:
            print(f"\n{label}: {report[label]['code']}")
            print_table(report[label], args)
    if "baseline" in report:
        report["ratios"] = ratios(report["baseline"], report["this"])
        print("\nthis / baseline: " + ", ".join(f"{k} {v}" for k, v in report["ratios"].items()))
    print(describe() + f"; load at start {host['load_1_5_15']}, at end {report['load_at_end']}")
    print(json.dumps(report))
    return report


def ratios(baseline: dict[str, Any], this: dict[str, Any]) -> dict[str, float | None]:
    """The figures that should shrink: memory over the idle baseline, memory per flood session."""
    out: dict[str, float | None] = {}
    for tool, figures in this.get("concurrency", {}).items():
        before = baseline["concurrency"][tool]["over_baseline_mb"]
        out[f"{tool}_peak_over_idle"] = round(figures["over_baseline_mb"] / before, 2) if before > 0 else None
    if "flood" in this:
        before, after = baseline["flood"], this["flood"]
        grown = [f["rss_after_mb"] - f["rss_before_mb"] for f in (before, after)]
        out["flood_rss_growth"] = round(grown[1] / grown[0], 2) if grown[0] > 0 else None
    return out


def print_table(report: dict[str, Any], args: argparse.Namespace) -> None:
    rows: list[tuple[str, str, Any]] = []
    if "victim" in report:
        v = report["victim"]
        rows.append((f"victim (max_sessions 200, {args.attack} x 3 attack sessions)", "survives", v["victim_survives"]))
        for key in ("sessionless_execute_code", "legacy_list_documents_many_addresses"):
            rows.append(("", key, v[key]))
        rows.append(("", "legacy_execute_code_one_address", v["legacy_execute_code_one_address"]))
    for tool, f in report.get("concurrency", {}).items():
        case = f"concurrency ({args.sessions} x {args.state_mb} MB kept, budget {args.budget_mb} MB)"
        value = (
            f"{f['peak_mb']:,} / {f['baseline_mb']:,} / {f['over_baseline_mb']:,} MB "
            f"({f['over_baseline_per_budget']}x), {f['seconds']} s, {f['outcomes']}"
        )
        rows.append((case, f"{tool}: peak / baseline / over (x budget)", value))
    if "flood" in report:
        f = report["flood"]
        later = next(k for k in f if k.startswith("flooding_address_after"))
        rows.append((f"flood ({f['initializes']:,} bare initializes)", f"in {f['seconds']} s", f["outcomes"]))
        per = f"{f['rss_before_mb']} / {f['rss_after_mb']} MB, {f['kb_per_open_session']} KB"
        rows.append(("", "RSS before / after, per open session", per))
        newcomers = f"{f['new_client_other_address']} / {f[later]}"
        rows.append(("", "new client: other address / flooding one later", newcomers))
    print("| case | figure | value |\n|---|---|---|")
    for row in rows:
        print("| " + " | ".join(str(cell) for cell in row) + " |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, help="knowledge base (default: the sample, built once under /tmp)")
    parser.add_argument("--code", type=Path, default=REPO, help="checkout to run the server from")
    parser.add_argument("--baseline", type=Path, help="checkout to run every case on first, for the ratios")
    parser.add_argument("--cases", nargs="+", default=["victim", "concurrency", "flood"])
    parser.add_argument("--attack", type=int, default=250, help="attack sessions of each kind (victim case)")
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--state-mb", type=int, default=40)
    parser.add_argument("--budget-mb", type=int, default=128)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--flood", type=int, default=2000)
    parser.add_argument("--unused-ttl", type=float, default=10.0, help="sessions.legacy_unused_ttl_seconds")
    parsed = parser.parse_args()
    if parsed.db is None:
        from mcp_analysis.config import load_settings
        from mcp_analysis.sample import ensure_sample_kb

        parsed.db = Path(tempfile.gettempdir()) / "mcp-analysis-bench-sample.lancedb"
        anyio.run(ensure_sample_kb, load_settings(db=parsed.db))
    anyio.run(main, parsed)
