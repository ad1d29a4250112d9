"""Idle memory: RSS of the server's process tree after start + one search, per knowledge base, beside haiku.rag's.

Knowledge bases, each served over stdio by this checkout (``ours``) and by a git revision
(``base``, ``--baseline REV``, default ``main``; exported with ``git archive`` and run with this
virtualenv), sides taking turns so machine noise hits each alike:
- ``--db sample``: the sample knowledge base (14 documents, our int8 MiniLM), opened by path;
- ``--sample``: the same through ``--sample``, already built (each side builds its own first);
- ``--db haiku.rag``: the knowledge base haiku.rag 0.101.1 wrote (tests/fixtures, 36 documents,
  311 chunks; its vectors are fp32 MiniLM's, so the exact variant embeds the query), a copy.

haiku.rag's own MCP server is not measured here: it is not installed in this environment and its
search needs its embedding model from the Hugging Face hub or an Ollama server, neither reachable
offline. Its figure is quoted from /work/shared/notes/reference-haiku-rag.md (v0.101.1, the same
machine kind, 30 documents / 333 chunks: 336-343 MB idle) and printed as quoted, not as measured.

    python bench/idle_memory.py [--runs 3] [--baseline main | --no-baseline]
Target: each knowledge base's idle RSS <= haiku.rag's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _machine import describe, machine  # noqa: E402
from lean import QUERIES, SETTLE_S, Side, compiled, contextmanager_or_none, tree_memory  # noqa: E402

HAIKU_FIXTURE = ROOT / "tests" / "fixtures" / "haiku_rag_db_0.101.1"
#: haiku.rag 0.101.1's MCP server, idle after start + one search (quoted: see the module's docstring).
HAIKU_RAG_IDLE_MB = (336, 343)


def servings(work: Path) -> dict[str, list[str]]:
    """Knowledge base -> the command-line arguments that serve it."""
    return {
        "--db sample": ["--db", str(work / "sample.lancedb"), "serve"],
        "--sample": ["--sample", "serve"],
        "--db haiku.rag": ["--db", str(work / "haiku.lancedb"), "serve"],
    }


async def idle(side: Side) -> dict[str, float]:
    async with Client(side.stdio()) as client:
        result = await client.call_tool("search", {"query": QUERIES[0]})
        assert not result.is_error, result
        await anyio.sleep(SETTLE_S)
        return tree_memory(side.pid())


def prepare(work: Path, sides: list[Side]) -> None:
    """The knowledge bases: the sample built once (by this checkout), each side's --sample built before it
    is measured (the build is not what is measured), the haiku.rag fixture copied (nothing writes the original)."""
    from mcp_analysis.config import load_settings
    from mcp_analysis.sample import ensure_sample_kb

    anyio.run(ensure_sample_kb, load_settings(db=work / "sample.lancedb"))
    shutil.copytree(HAIKU_FIXTURE, work / "haiku.lancedb")
    for side in sides:
        build = [*side.command[:3], "--sample", "list"]
        subprocess.run(build, cwd=side.cwd, env=side.env, check=True, stdout=subprocess.DEVNULL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--baseline", default="main", help="git revision measured beside this checkout")
    parser.add_argument("--no-baseline", action="store_true")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="idle-memory-"))
    python = sys.executable
    compiled(ROOT / "mcp_analysis")

    def env(name: str, extra: dict[str, str] | None = None) -> dict[str, str]:
        return {
            **os.environ,
            "XDG_DATA_HOME": str(work / name / "data"),
            "MCP_ANALYSIS_SESSIONS__DIR": str(work / name / "sessions"),
            **(extra or {}),
        }

    with contextmanager_or_none(None if args.no_baseline else args.baseline) as exported:
        sides = [Side("ours", [python, "-m", "mcp_analysis"], env("ours"), ROOT)]
        commit = None
        if exported is not None:
            code, commit = exported
            sides.append(Side("base", [python, "-m", "mcp_analysis"], env("base", {"PYTHONPATH": str(code)}), code))
        prepare(work, sides)
        runs: list[dict[str, Any]] = []
        for n in range(args.runs):
            run: dict[str, Any] = {"load_before": machine()["load_1_5_15"]}
            for kb, serve in servings(work).items():
                for side in sides:
                    serving = Side(side.name, [*side.command, *serve], side.env, side.cwd)
                    run[f"{side.name} {kb}"] = anyio.run(idle, serving)
            run["load_after"] = machine()["load_1_5_15"]
            runs.append(run)
            print(f"run {n + 1}/{args.runs} done (load {run['load_after']})", file=sys.stderr)
    shutil.rmtree(work, ignore_errors=True)
    report(runs, [s.name for s in sides], commit, args.baseline)


def report(runs: list[dict[str, Any]], sides: list[str], commit: str | None, baseline: str) -> None:
    def cell(key: str, field: str) -> str:
        values = [r[key][field] for r in runs]
        return f"{statistics.median(values):.0f} ({min(values):.0f}-{max(values):.0f})"

    low, high = HAIKU_RAG_IDLE_MB
    print(f"ours = this checkout; base = {commit or '-'} ({baseline}); RSS of the process tree, MB, median (min-max)")
    heads = "".join(f"{s + ' RSS':>20}{s + ' anon':>20}" for s in sides)
    print(f"{'knowledge base':<18}{heads}  haiku.rag (quoted)")
    for kb in servings(Path()):
        cells = "".join(f"{cell(f'{s} {kb}', 'rss'):>20}{cell(f'{s} {kb}', 'anon'):>20}" for s in sides)
        print(f"{kb:<18}{cells}  {low}-{high}")
    loads = [r["load_before"][0] for r in runs] + [r["load_after"][0] for r in runs]
    print(f"{describe()}; 1-minute load average {min(loads):.1f}-{max(loads):.1f} during the runs")
    print(json.dumps({"bench": "idle_memory", "machine": machine(), "baseline": commit, "runs": runs}))


if __name__ == "__main__":
    main()
