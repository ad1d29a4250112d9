"""A renamed folder in a watched folder: the time to bring the knowledge base in line, next to a baseline.

Each side (this checkout, and a baseline revision exported beside it) runs in a fresh process
on a fresh knowledge base: it mirrors a watched folder holding the documents (the sample's 14
by default: Markdown, HTML, PDF, DOCX, a workbook and a scanned memo that needs OCR), renames
the folder inside it, and times applying the two paths the watcher reports (the old name and
the new), as `serve --watch` does. The sides take turns, `--runs` times. Also printed: the
memory of the conversion worker the watcher keeps up after a change (`watch.keep_worker_seconds`).

    python bench/moves.py [--runs 3] [--baseline main | --no-baseline] [--docs DIR]
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
import time
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from _machine import describe, machine  # noqa: E402


async def child(work: Path, docs: Path) -> dict[str, Any]:
    """One side, in this process: mirror, rename, apply."""
    from mcp_analysis.config import load_settings
    from mcp_analysis.corpus import KnowledgeBase
    from mcp_analysis.watch.mirror import FolderMirror
    from mcp_analysis.watch.rules import FileRules

    watched = work / "watched"
    shutil.copytree(docs, watched / "reports")
    kb = await KnowledgeBase.open(load_settings(db=work / "kb.lancedb"), create=True)
    mirror = FolderMirror(kb, [watched], FileRules())
    started = time.perf_counter()
    first = await mirror.sync()
    synced = time.perf_counter() - started
    kept = _worker_memory(getattr(mirror, "pool", None))
    ids = {d.id for d in await kb.corpus().documents()}
    (watched / "reports").rename(watched / "reports-2025")
    started = time.perf_counter()
    report = await mirror.apply([watched / "reports", watched / "reports-2025"])
    renamed = time.perf_counter() - started
    after = await kb.corpus().documents()
    if hasattr(mirror, "close"):  # a baseline from before the mirror kept its conversion worker has none
        mirror.close()
    await kb.close()
    return {
        "documents": len(first.added),
        "sync_s": synced,
        "rename_s": renamed,
        "moved": len(getattr(report, "moved", [])),
        "added": len(report.added),
        "removed": len(report.removed),
        "chunks_written": report.chunks,
        "ids_kept": len(ids & {d.id for d in after}),
        "kept_worker_mb": kept,
    }


def _worker_memory(pool: Any) -> dict[str, float] | None:
    """RSS and USS (MB) of the conversion worker the mirror keeps up after a change, if any."""
    import psutil

    if pool is None or not pool.pids():
        return None
    info = psutil.Process(pool.pids()[0]).memory_full_info()
    return {"rss": info.rss / 2**20, "uss": info.uss / 2**20}


def run_side(code: Path, docs: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="moves-bench-") as tmp:
        env = {**os.environ, "PYTHONPATH": str(code), "XDG_DATA_HOME": str(Path(tmp) / "data")}
        command = [sys.executable, str(ROOT / "bench" / "moves.py"), "--child", tmp, "--docs", str(docs)]
        done = subprocess.run(command, cwd=code, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"the side in {code} failed:\n{done.stderr[-3000:]}")
        return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def cell(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--baseline", default="main", help="git revision measured beside this checkout")
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--docs", type=Path, default=None, help="the documents in the renamed folder")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.docs is None:
        from mcp_analysis.sample import documents_dir

        args.docs = documents_dir()
    if args.child:
        print(json.dumps(anyio.run(child, args.child, args.docs)))
        return
    from lean import compiled, contextmanager_or_none

    compiled(ROOT / "mcp_analysis")
    runs: dict[str, list[dict[str, Any]]] = {}
    commit = None
    with contextmanager_or_none(None if args.no_baseline else args.baseline) as exported:
        places = {"ours": ROOT}
        if exported is not None:
            places["base"], commit = exported
        for _ in range(args.runs):  # the sides take turns, so a change of load hits both alike
            for name, code in places.items():
                runs.setdefault(name, []).append(run_side(code, args.docs))
    print(f"ours = this checkout; base = {commit or '-'} ({args.baseline}); {runs['ours'][0]['documents']} documents")
    print("side".ljust(6) + "first mirror, s".rjust(22) + "folder renamed, s".rjust(22) + "   last rename: what it did")
    for name, taken in runs.items():
        last = taken[-1]
        did = (
            f"{last['moved']} moved, {last['added']} added, {last['removed']} removed, "
            f"{last['chunks_written']} chunks written, {last['ids_kept']} ids kept"
        )
        row = cell([r["sync_s"] for r in taken]).rjust(22) + cell([r["rename_s"] for r in taken]).rjust(22)
        print(name.ljust(6) + row + "   " + did)
    memory = [r["kept_worker_mb"] for r in runs["ours"] if r["kept_worker_mb"]]
    if memory:
        rss, uss = [m["rss"] for m in memory], [m["uss"] for m in memory]
        print(f"ours: the conversion worker kept up after the first mirror: RSS {cell(rss)} MB, USS {cell(uss)} MB")
    if "base" in runs:
        ratios = [b["rename_s"] / o["rename_s"] for o, b in zip(runs["ours"], runs["base"], strict=True)]
        print(f"rename: base / ours = {statistics.median(ratios):.0f}x ({min(ratios):.0f}x-{max(ratios):.0f}x)")
    print(f"{describe()}; {args.runs} runs; load at the end {machine()['load_1_5_15']}")
    print(json.dumps({"bench": "moves", "machine": machine(), "baseline": commit, "runs": runs}))


if __name__ == "__main__":
    main()
