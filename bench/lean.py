"""Lean and quick: the server's memory and per-call overhead next to the protocol's floor.

Measured side by side in one run, servers taking turns so machine noise hits each alike:
- ``bare``: an `mcp` MCPServer with one trivial tool (the floor any MCP server pays);
- ``ours``: this checkout's ``mcp-analysis --db DB serve``;
- ``base`` (``--baseline REV``, default ``main``): the same command from that git revision
  (exported with ``git archive``, run with this virtualenv), to show what changed.

Figures (stdio unless said; RSS of the server's process tree: the server and its monty workers):
1. RSS idle after start + one search;
2. RSS after 30 searches + 100 ``execute_code`` calls;
3. RSS with 200 idle sessions (HTTP, 200 anonymous clients each keeping a variable);
4. ``execute_code('1')`` p50 vs a bare tool call, the two called alternately; ``search`` p50;
5. spawn -> first ``search`` answered, vs bare spawn -> ``tools/list``;
6. spawn -> ``tools/list``, vs bare.

    python bench/lean.py [--runs 3] [--baseline main | --no-baseline] [--docs DIR]
Targets: 1 <= 300 MB, 2 <= 350 MB, 3 <= 380 MB; execute_code <= 1.3x bare; search p50 not slower
than the baseline's; 5 <= 1.5x; 6 <= 1.2x.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import AsyncExitStack, contextmanager
from pathlib import Path
from typing import Any

import anyio
import jsonschema  # noqa: F401  the client validates results with it: loaded before any timing
import psutil
from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _machine import describe, machine  # noqa: E402
from _serving import wait_listening  # noqa: E402
from server import BARE, free_port, http_client  # noqa: E402

QUERIES = [
    "quarterly revenue growth",
    "security vulnerability advisory",
    "engineering roadmap milestones",
    "customer research key findings",
    "firmware update for the sonar",
    "operating margin in the fourth quarter",
]
SETTLE_S = 3.0  # idle time before a memory reading (background work finishes, allocators settle)


# ----------------------------------------------------------------------------- servers


class Side:
    """One server kind: how to spawn it over stdio (and over HTTP), and how to find its process."""

    def __init__(self, name: str, command: list[str], env: dict[str, str], cwd: Path) -> None:
        self.name = name
        self.command = command
        self.env = {**env, "LEAN_BENCH_SIDE": name}
        self.cwd = cwd

    def stdio(self) -> StdioServerParameters:
        return StdioServerParameters(command=self.command[0], args=self.command[1:], env=self.env, cwd=str(self.cwd))

    def pid(self) -> int:
        """The newest process of this side among our children (the server, not its workers)."""
        mine = [
            p
            for p in psutil.Process().children(recursive=True)
            if _environ(p).get("LEAN_BENCH_SIDE") == self.name and p.name().startswith("python")
        ]
        if not mine:
            raise RuntimeError(f"no {self.name} server process found")
        return max(mine, key=lambda p: p.create_time()).pid


def _environ(proc: psutil.Process) -> dict[str, str]:
    try:
        return proc.environ()
    except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
        return {}


@contextmanager
def baseline_code(rev: str) -> Iterator[tuple[Path, str]]:
    """The package at `rev`, exported (no git worktree): (directory to run it from, commit)."""
    commit = subprocess.run(["git", "rev-parse", "--short", rev], cwd=ROOT, check=True, capture_output=True, text=True)
    with tempfile.TemporaryDirectory(prefix="lean-baseline-") as tmp:
        archive = subprocess.run(["git", "archive", rev, "mcp_analysis"], cwd=ROOT, check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
        compiled(Path(tmp) / "mcp_analysis")
        yield Path(tmp), commit.stdout.strip()


def compiled(package: Path) -> None:
    """Write `package`'s bytecode, as installing it would: with PYTHONDONTWRITEBYTECODE set (as on
    these machines) a side without it would compile its modules from source at every spawn."""
    if not compileall.compile_dir(package, quiet=1, workers=0):
        raise SystemExit(f"could not compile {package}")


@contextmanager
def http_server(command: list[str], port: int, side: Side) -> Iterator[subprocess.Popen[bytes]]:
    """The server listening on `port` (run from the side's directory, so its code is the one imported)."""
    proc = subprocess.Popen(command, cwd=side.cwd, env=side.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if wait_listening(proc, port, 120) is not None:
            raise RuntimeError(f"server did not start: {command}")
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def tree_memory(pid: int) -> dict[str, float]:
    """MB of the process and its descendants: RSS (the figure), and of it anonymous memory and PSS."""
    procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    total = {"rss": 0.0, "anon": 0.0, "pss": 0.0}
    for proc in procs:
        try:
            with open(f"/proc/{proc.pid}/smaps_rollup") as handle:
                rows = [line.split() for line in handle]
            fields = {row[0].rstrip(":"): int(row[1]) for row in rows if len(row) > 1 and row[1].isdigit()}
        except OSError:
            continue
        total["rss"] += fields.get("Rss", 0) / 1024
        total["anon"] += fields.get("Anonymous", 0) / 1024
        total["pss"] += fields.get("Pss", 0) / 1024
    total["threads"] = float(psutil.Process(pid).num_threads())
    total["processes"] = float(len(procs))
    return total


# ----------------------------------------------------------------------------- measuring


async def spawn_to_list(side: Side) -> float:
    started = time.perf_counter()
    async with Client(side.stdio()) as client:
        await client.list_tools()
        return time.perf_counter() - started


async def spawn_to_search(side: Side) -> float:
    started = time.perf_counter()
    async with Client(side.stdio()) as client:
        result = await client.call_tool("search", {"query": QUERIES[0]})
        elapsed = time.perf_counter() - started
        assert not result.is_error, result
        return elapsed


async def call_ms(client: Client, tool: str, args: dict[str, Any]) -> float:
    started = time.perf_counter()
    result = await client.call_tool(tool, args)
    elapsed = (time.perf_counter() - started) * 1000
    assert not result.is_error, result
    return elapsed


async def stdio_round(sides: list[Side], bare: Side, calls: int, searches: int) -> dict[str, Any]:
    """Each server spawned once: memory after one search and after the load, calls taken in turns."""
    out: dict[str, Any] = {}
    async with AsyncExitStack() as stack:
        clients = {s.name: await stack.enter_async_context(Client(s.stdio())) for s in [bare, *sides]}
        await clients[bare.name].list_tools()
        for side in sides:
            await call_ms(clients[side.name], "search", {"query": QUERIES[0]})
        await anyio.sleep(SETTLE_S)
        for side in [bare, *sides]:
            out[side.name] = {"after_one_search": tree_memory(side.pid())}
        # execute_code('1') against a bare call, alternately; search p50 of each side, alternately.
        warm = [("ping", bare, {"x": 1})] + [("execute_code", s, {"code": "1"}) for s in sides]
        for tool, side, args in warm:
            await call_ms(clients[side.name], tool, args)
        times: dict[str, list[float]] = {f"{s.name}:{t}": [] for t, s, _ in warm}
        for _ in range(calls):
            for tool, side, args in warm:
                times[f"{side.name}:{tool}"].append(await call_ms(clients[side.name], tool, args))
        for i in range(searches):
            for side in sides:
                query = f"{QUERIES[i % len(QUERIES)]} {i}"
                times.setdefault(f"{side.name}:search", []).append(
                    await call_ms(clients[side.name], "search", {"query": query})
                )
        # Up to 30 searches and 100 execute_code calls since start (the searches above count).
        for side in sides:
            done = 1 + searches
            for i in range(max(0, 30 - done)):
                await call_ms(clients[side.name], "search", {"query": f"{QUERIES[i % len(QUERIES)]} more {i}"})
            for i in range(max(0, 100 - calls - 1)):
                await call_ms(clients[side.name], "execute_code", {"code": f"v{i % 10} = [{i}] * 100\nlen(v{i % 10})"})
        await anyio.sleep(SETTLE_S)
        for side in sides:
            out[side.name]["after_load"] = tree_memory(side.pid())
        for key, values in times.items():
            name, tool = key.split(":")
            out[name].setdefault("p50_ms", {})[tool] = statistics.median(values)
    return out


async def idle_sessions(side: Side, sessions: int) -> dict[str, float]:
    """An HTTP server: one search, then `sessions` anonymous clients each keep a variable."""
    port = free_port()
    command = [*side.command, "--http", "--port", str(port)]
    with http_server(command, port, side) as proc:
        url = f"http://127.0.0.1:{port}/mcp"
        async with http_client(url) as client:
            await call_ms(client, "search", {"query": QUERIES[0]})
            for i in range(sessions):
                result = await client.call_tool("execute_code", {"code": f"mine = {i}\nrows = list(range(1000))"})
                assert not result.is_error, result
        await anyio.sleep(SETTLE_S)
        return tree_memory(proc.pid)


def spawn_times(sides: list[Side], bare: Side, rounds: int) -> dict[str, dict[str, list[float]]]:
    """Spawn -> tools/list for every side, spawn -> first search for ours, taking turns."""
    everyone = [bare, *sides]
    out: dict[str, dict[str, list[float]]] = {s.name: {"tools_list_s": [], "first_search_s": []} for s in everyone}
    for _ in range(rounds):
        for side in everyone:
            out[side.name]["tools_list_s"].append(anyio.run(spawn_to_list, side))
        for side in sides:
            out[side.name]["first_search_s"].append(anyio.run(spawn_to_search, side))
    return out


# ----------------------------------------------------------------------------- reporting


def one_run(sides: list[Side], bare: Side, args: argparse.Namespace) -> dict[str, Any]:
    load = machine()["load_1_5_15"]
    spawn = spawn_times(sides, bare, args.spawns)
    stdio = anyio.run(stdio_round, sides, bare, args.calls, args.searches)
    run: dict[str, Any] = {"load_before": load}
    bare_list = statistics.median(spawn[bare.name]["tools_list_s"])
    bare_ping = stdio[bare.name]["p50_ms"]["ping"]
    run[bare.name] = {
        "rss_idle_mb": stdio[bare.name]["after_one_search"]["rss"],
        "tools_list_s": bare_list,
        "ping_p50_ms": bare_ping,
    }
    for side in sides:
        s = stdio[side.name]
        run[side.name] = {
            "rss_idle_mb": s["after_one_search"]["rss"],
            "anon_idle_mb": s["after_one_search"]["anon"],
            "pss_idle_mb": s["after_one_search"]["pss"],
            "threads_idle": s["after_one_search"]["threads"],
            "rss_after_load_mb": s["after_load"]["rss"],
            "anon_after_load_mb": s["after_load"]["anon"],
            "rss_idle_sessions_mb": anyio.run(idle_sessions, side, args.sessions)["rss"],
            "execute_p50_ms": s["p50_ms"]["execute_code"],
            "execute_vs_bare": s["p50_ms"]["execute_code"] / bare_ping,
            "search_p50_ms": s["p50_ms"]["search"],
            "first_search_s": statistics.median(spawn[side.name]["first_search_s"]),
            "first_search_vs_bare_list": statistics.median(spawn[side.name]["first_search_s"]) / bare_list,
            "tools_list_s": statistics.median(spawn[side.name]["tools_list_s"]),
            "tools_list_vs_bare": statistics.median(spawn[side.name]["tools_list_s"]) / bare_list,
        }
    run["load_after"] = machine()["load_1_5_15"]
    return run


ROWS = [
    ("RSS idle after start + one search, MB", "rss_idle_mb", "{:.0f}", "<= 300"),
    ("  of it anonymous, MB", "anon_idle_mb", "{:.0f}", ""),
    ("  PSS, MB", "pss_idle_mb", "{:.0f}", ""),
    ("  threads (server process)", "threads_idle", "{:.0f}", ""),
    ("RSS after 30 searches + 100 execute_code, MB", "rss_after_load_mb", "{:.0f}", "<= 350"),
    ("RSS with 200 idle sessions (HTTP), MB", "rss_idle_sessions_mb", "{:.0f}", "<= 380"),
    ("execute_code('1') p50, ms", "execute_p50_ms", "{:.2f}", ""),
    ("  vs a bare tool call (alternately)", "execute_vs_bare", "{:.2f}x", "<= 1.3x"),
    ("search p50, ms", "search_p50_ms", "{:.1f}", "not slower"),
    ("spawn -> first search answered, s", "first_search_s", "{:.2f}", ""),
    ("  vs bare spawn -> tools/list", "first_search_vs_bare_list", "{:.2f}x", "<= 1.5x"),
    ("spawn -> tools/list, s", "tools_list_s", "{:.2f}", ""),
    ("  vs bare", "tools_list_vs_bare", "{:.2f}x", "<= 1.2x"),
]


def cell(runs: list[dict[str, Any]], side: str, key: str, fmt: str) -> str:
    values = [r[side][key] for r in runs if key in r.get(side, {})]
    if not values:
        return "-"
    if len(values) == 1:
        return fmt.format(values[0])
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def report(runs: list[dict[str, Any]], names: list[str]) -> None:
    width = 26
    print(f"{'figure (median (min-max) over runs)':<46}" + "".join(f"{n:>{width}}" for n in names) + f"{'target':>10}")
    bare_rows = {"rss_idle_mb": "rss_idle_mb", "tools_list_s": "tools_list_s", "execute_p50_ms": "ping_p50_ms"}
    for label, key, fmt, target in ROWS:
        cells = []
        for name in names:
            if name == "bare":
                cells.append(cell(runs, name, bare_rows[key], fmt) if key in bare_rows else "-")
            else:
                cells.append(cell(runs, name, key, fmt))
        print(f"{label:<46}" + "".join(f"{c:>{width}}" for c in cells) + f"{target:>10}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--spawns", type=int, default=3, help="spawns of each server per run (medians)")
    parser.add_argument("--calls", type=int, default=100, help="execute_code / bare calls per run, alternately")
    parser.add_argument("--searches", type=int, default=20, help="timed searches per run")
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--baseline", default="main", help="git revision measured beside this checkout")
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--docs", type=Path, default=None, help="documents to serve (default: the sample)")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="lean-bench-"))
    env = {**os.environ, "XDG_DATA_HOME": str(work / "data"), "MCP_ANALYSIS_SESSIONS__DIR": str(work / "sessions")}
    db = work / "kb.lancedb"
    python = sys.executable
    if args.docs is None:
        from mcp_analysis.config import load_settings
        from mcp_analysis.sample import ensure_sample_kb

        anyio.run(ensure_sample_kb, load_settings(db=db))
    else:
        add = [python, "-m", "mcp_analysis", "--db", str(db), "add", str(args.docs)]
        subprocess.run(add, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
    (work / "bare.py").write_text(BARE)
    compiled(ROOT / "mcp_analysis")
    serve = ["-m", "mcp_analysis", "--db", str(db), "serve"]
    bare = Side("bare", [python, str(work / "bare.py")], env, ROOT)
    ours = Side("ours", [python, *serve], env, ROOT)

    with contextmanager_or_none(None if args.no_baseline else args.baseline) as exported:
        sides = [ours]
        commit = None
        if exported is not None:
            code, commit = exported
            sides.append(Side("base", [python, *serve], {**env, "PYTHONPATH": str(code)}, code))
        runs = []
        for n in range(args.runs):
            runs.append(one_run(sides, bare, args))
            print(f"run {n + 1}/{args.runs} done (load {runs[-1]['load_after']})", file=sys.stderr)
    names = ["bare", *(s.name for s in sides)]
    print(f"ours = this checkout; base = {commit or '-'} ({args.baseline}); bare = MCPServer with one tool")
    report(runs, names)
    loads = [r["load_before"][0] for r in runs] + [r["load_after"][0] for r in runs]
    print(f"{describe()}; 1-minute load average {min(loads):.1f}-{max(loads):.1f} during the runs")
    print(json.dumps({"bench": "lean", "machine": machine(), "baseline": commit, "runs": runs}))


@contextmanager
def contextmanager_or_none(rev: str | None) -> Iterator[tuple[Path, str] | None]:
    if rev is None:
        yield None
        return
    with baseline_code(rev) as exported:
        yield exported


if __name__ == "__main__":
    main()
