"""Where a serving process's memory and start time go, step by step, next to a baseline revision.

Each side runs in a fresh process that takes the steps a starting `serve` takes (the server
app, the runtime's imports, the native libraries, the knowledge base, the embedder, one
search), with garbage collection paused around the imports as `serve` does, and reads its own
/proc/self/smaps_rollup and the time after each; then the largest mappings. RSS includes
shared library pages; the monty worker processes are not counted here (bench/lean.py measures
the whole process tree). The steps run one after another: in `serve` the event loop answers
`tools/list` meanwhile and the worker pool starts beside the embedder, so their sum is what the
first search waits for after the app, not the server's figure. The sides take turns, `--runs`
times; times are the median (min-max) over runs, memory is the last run's.

    python bench/lean_steps.py [--runs 5] [--baseline main | --no-baseline] [--docs DIR | --db KB]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from _machine import describe, machine  # noqa: E402

STEPS = [
    ("python", "Python started"),
    ("app", "server app imported (`tools/list` can be answered)"),
    ("runtime_imports", "the runtime's imports (store, LanceDB, pyarrow, numpy, search, sessions)"),
    ("native", "onnxruntime, tokenizers, monty imported"),
    ("kb", "knowledge base opened"),
    ("embedder", "embedder loaded, first query embedded"),
    ("search", "first search answered"),
]


def _rollup() -> dict[str, float]:
    with open("/proc/self/smaps_rollup") as handle:
        rows = [line.split() for line in handle]
    fields = {row[0].rstrip(":"): int(row[1]) for row in rows if len(row) > 1 and row[1].isdigit()}
    return {"rss": fields["Rss"] / 1024, "anon": fields["Anonymous"] / 1024, "modules": float(len(sys.modules))}


def _mappings(top: int = 8) -> list[tuple[str, float]]:
    """MB resident per mapped file (anonymous memory and the heap together), largest first."""
    sizes: dict[str, float] = {}
    name = "anonymous + heap"
    with open("/proc/self/smaps") as handle:
        for line in handle:
            parts = line.split()
            if parts and "-" in parts[0] and not parts[0].endswith(":"):
                path = parts[5] if len(parts) > 5 else ""
                name = "anonymous + heap" if not path.startswith("/") else Path(path).name
            elif parts and parts[0] == "Rss:":
                sizes[name] = sizes.get(name, 0.0) + int(parts[1]) / 1024
    return sorted(sizes.items(), key=lambda item: -item[1])[:top]


def _process_started() -> float:
    """When this process was created, on `time.perf_counter`'s clock (to the kernel's 10 ms tick)."""
    with open("/proc/self/stat") as handle:
        ticks = int(handle.read().rsplit(") ", 1)[1].split()[19])
    with open("/proc/uptime") as handle:
        uptime = float(handle.read().split()[0])
    return time.perf_counter() - (uptime - ticks / os.sysconf("SC_CLK_TCK"))


def _reading(started: float) -> dict[str, float]:
    return {**_rollup(), "s": time.perf_counter() - started}


def child(db: str) -> None:
    """The steps, in this process; one JSON line on stdout."""
    started = _process_started()
    readings = {"python": _reading(started)}
    import importlib

    try:  # as `serve` does, where the measured revision has it
        from mcp_analysis.process_gc import imports_paused, own_process
    except ImportError:
        imports_paused, own_process = (lambda phase: contextlib.nullcontext()), (lambda: None)
    own_process()
    with imports_paused("server"):
        importlib.import_module("mcp_analysis.server.app")
    readings["app"] = _reading(started)
    with imports_paused("runtime"):
        for module in ("mcp_analysis.corpus", "mcp_analysis.session.manager", "mcp_analysis.sandbox.pool"):
            importlib.import_module(module)
    readings["runtime_imports"] = _reading(started)
    for module in ("onnxruntime", "tokenizers", "pydantic_monty"):
        importlib.import_module(module)
    readings["native"] = _reading(started)

    from mcp_analysis.config import load_settings
    from mcp_analysis.corpus import KnowledgeBase

    async def serve_one_search() -> None:
        kb = await KnowledgeBase.open(load_settings(db=db))
        readings["kb"] = _reading(started)
        embedder = await kb.embedder()
        await embedder.embed_query("quarterly revenue growth")
        readings["embedder"] = _reading(started)
        corpus = await kb.open_corpus(None)
        await corpus.search("quarterly revenue growth")
        readings["search"] = _reading(started)
        readings["threads"] = {"count": float(len(list(Path("/proc/self/task").iterdir())))}

    anyio.run(serve_one_search)
    print(json.dumps({"steps": readings, "mappings": _mappings()}))


def run_side(db: Path, cwd: Path, env: dict[str, str]) -> dict[str, Any]:
    command = [sys.executable, str(ROOT / "bench" / "lean_steps.py"), "--child", str(db)]
    done = subprocess.run(command, cwd=cwd, env=env, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def report_times(runs: dict[str, list[dict[str, Any]]]) -> None:
    """Seconds each step took (median (min-max) over runs), and since the process was created."""
    names = list(runs)
    print("step, seconds".ljust(76) + "".join(f"{n + ' step (range); since start':>40}" for n in names))
    previous = None
    for key, label in STEPS:
        cells = []
        for n in names:
            at = [r["steps"][key]["s"] for r in runs[n]]
            took = [r["steps"][key]["s"] - r["steps"][previous]["s"] for r in runs[n]] if previous else at
            cell = f"{statistics.median(took):.3f} ({min(took):.3f}-{max(took):.3f}); {statistics.median(at):.3f}"
            cells.append(cell.rjust(40))
        print(label.ljust(76) + "".join(cells))
        previous = key


def report(sides: dict[str, dict[str, Any]]) -> None:
    names = list(sides)
    print("step".ljust(76) + "".join(f"{n + ' RSS (+added), anon':>34}" for n in names))
    previous = {n: 0.0 for n in names}
    for key, label in STEPS:
        cells = []
        for n in names:
            reading = sides[n]["steps"][key]
            cells.append(f"{reading['rss']:.0f} (+{reading['rss'] - previous[n]:.0f}), {reading['anon']:.0f}".rjust(34))
            previous[n] = reading["rss"]
        print(label.ljust(76) + "".join(cells))
    print("threads".ljust(76) + "".join(f"{sides[n]['steps']['threads']['count']:>34.0f}" for n in names))
    for n in names:
        print(f"{n}: largest mappings, MB: " + ", ".join(f"{name} {mb:.0f}" for name, mb in sides[n]["mappings"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", default="main", help="git revision measured beside this checkout")
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--docs", type=Path, default=None, help="documents to serve (default: the sample)")
    parser.add_argument("--db", type=Path, default=None, help="an existing knowledge base to open instead")
    parser.add_argument("--runs", type=int, default=5, help="runs of each side, taking turns")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    with tempfile.TemporaryDirectory(prefix="lean-steps-") as tmp:
        measure(args, Path(tmp))


def measure(args: argparse.Namespace, work: Path) -> None:
    env = {**os.environ, "XDG_DATA_HOME": str(work / "data")}
    db = args.db or work / "kb.lancedb"
    if args.db is None and args.docs is None:
        from mcp_analysis.config import load_settings
        from mcp_analysis.sample import ensure_sample_kb

        anyio.run(ensure_sample_kb, load_settings(db=db))
    elif args.db is None:
        add = [sys.executable, "-m", "mcp_analysis", "--db", str(db), "add", str(args.docs)]
        subprocess.run(add, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
    from lean import compiled, contextmanager_or_none  # here: the measured child imports nothing of the bench

    compiled(ROOT / "mcp_analysis")

    places = {"ours": (ROOT, {**env, "PYTHONPATH": str(ROOT)})}
    commit = None
    runs: dict[str, list[dict[str, Any]]] = {}
    with contextmanager_or_none(None if args.no_baseline else args.baseline) as exported:
        if exported is not None:
            code, commit = exported
            places["base"] = (code, {**env, "PYTHONPATH": str(code)})
        for _ in range(args.runs):  # the sides take turns, so a change of load hits both alike
            for name, (cwd, side_env) in places.items():
                runs.setdefault(name, []).append(run_side(db, cwd, side_env))
    sides = {name: taken[-1] for name, taken in runs.items()}
    print(f"ours = this checkout; base = {commit or '-'} ({args.baseline}); MB, one process (no monty workers)")
    report(sides)
    report_times(runs)
    print(f"{describe()}; {args.runs} runs; load at the end {machine()['load_1_5_15']}")
    print(json.dumps({"bench": "lean_steps", "machine": machine(), "baseline": commit, "runs": runs}))


if __name__ == "__main__":
    main()
