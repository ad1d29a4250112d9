"""What one hostile file costs `mcp-analysis add`: seconds and peak memory, with the per-file bounds.

Each case is a folder holding one good Markdown file and one hostile entry (tests/ingest/
hostile_files.py builds them), added with the real command line. The baseline is the same folder
without the hostile entry, added in the same run: the ratio shows what the hostile entry adds.
Peak RSS is sampled (every 20 ms) over the whole process tree: the CLI and its conversion workers.
Each add runs under a --cap-seconds wall clock and a --cap-mb memory cap (killed past either), so a
case that would hang, take minutes or eat the machine shows as "> cap". --ref REV runs the same
cases on another revision of the code (e.g. main before the bounds) for comparison; it is exported
with `git archive`, nothing is checked out.

    .venv/bin/python bench/ingest_bounds.py                  # every case, the current code
    .venv/bin/python bench/ingest_bounds.py --ref main --cap-seconds 60 --cases fifo,docx-200k
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
from _machine import describe, machine

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.ingest import hostile_files as hostile  # noqa: E402

MB = hostile.MB
CASES: dict[str, tuple[Callable[[Path], Path], dict[str, str]]] = {
    "normal-100-md": (lambda d: _normal_files(d, 100), {}),  # not hostile: what the workers cost plain ingest
    "fifo": (lambda d: hostile.fifo(d / "pipe.txt"), {}),
    "dev-zero-link": (lambda d: hostile.device_link(d / "zero.txt"), {}),
    "sparse-300mb-txt": (lambda d: hostile.sparse_text(d / "huge.txt", 300 * MB), {}),
    "sparse-60mb-txt": (lambda d: hostile.sparse_text(d / "nul.txt", 60 * MB), {}),
    "docx-200k": (lambda d: hostile.many_paragraphs_docx(d / "tiny.docx", 200_000), {}),
    "html-nested-100k": (lambda d: hostile.nested_html(d / "deep.html", 100_000), {}),
    "md-quotes-5000": (lambda d: _write(d / "quotes.md", ">" * 5000 + " deep\n"), {}),
    "symlink-loop": (lambda d: hostile.symlink_loop(d / "loop.md"), {}),
    "text-3m-paragraphs@256MB": (
        lambda d: hostile.many_tiny_paragraphs_text(d / "words.txt", 3_000_000),
        {"MCP_ANALYSIS_INGEST__MAX_ITEMS": "100000000", "MCP_ANALYSIS_INGEST__MAX_MEMORY_MB": "256"},
    ),
    "html-50k@depth-100k+5s": (
        lambda d: hostile.nested_html(d / "slow.html", 50_000),
        {"MCP_ANALYSIS_INGEST__MAX_DEPTH": "100000", "MCP_ANALYSIS_INGEST__MAX_SECONDS_PER_FILE": "5"},
    ),
}


def _normal_files(folder: Path, count: int) -> Path:
    """`count` ordinary Markdown notes of a few paragraphs each."""
    for n in range(count):
        lines = (f"Item {n}.{k}: berth {k} was inspected; fenders and bollards are sound." for k in range(8))
        paragraphs = "\n\n".join(lines)
        (folder / f"note{n:03d}.md").write_text(f"# Note {n}\n\n{paragraphs}\n")
    return folder


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def tree_rss(process: psutil.Process) -> int:
    total = 0
    for member in [process, *process.children(recursive=True)]:
        try:
            total += member.memory_info().rss
        except psutil.Error:
            continue
    return total


def run_add(code: Path, folder: Path, db: Path, env: dict[str, str], cap: float, cap_mb: int) -> dict[str, object]:
    """One `add` of `folder`: seconds, peak tree RSS, exit code, and what was skipped."""
    environment = {**os.environ, **env, "PYTHONPATH": str(code)}
    started = time.monotonic()
    child = subprocess.Popen(
        [sys.executable, "-m", "mcp_analysis", "--db", str(db), "add", str(folder), "--json"],
        cwd=code,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    watched = psutil.Process(child.pid)
    peak = 0
    killed = False
    while child.poll() is None:
        with contextlib.suppress(psutil.Error):
            peak = max(peak, tree_rss(watched))
        if time.monotonic() - started > cap or peak > cap_mb * MB:
            for member in [watched, *watched.children(recursive=True)]:
                member.kill()
            killed = True
            break
        time.sleep(0.02)
    out = child.communicate()[0]
    seconds = time.monotonic() - started
    skipped: list[list[str]] = []
    if not killed:
        with contextlib.suppress(ValueError):
            skipped = json.loads(out).get("skipped", [])
    return {
        "seconds": round(seconds, 2),
        "peak_rss_mb": round(peak / MB),
        "exit": None if killed else child.returncode,
        "killed_at_cap": killed,  # the wall clock or the memory cap
        "reason": skipped[0][1] if skipped else "",
    }


def export(ref: str, into: Path) -> Path:
    """The tree of revision `ref` as files (git archive), to run another version of the code."""
    archive = into / "code.tar"
    subprocess.run(["git", "archive", "--format=tar", "-o", str(archive), ref], cwd=REPO, check=True)
    target = into / "code"
    with tarfile.open(archive) as tar:
        tar.extractall(target, filter="data")
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated case names")
    parser.add_argument("--cap-seconds", type=float, default=300.0, help="kill an add after this long")
    parser.add_argument("--cap-mb", type=int, default=4096, help="kill an add whose process tree passes this RSS")
    parser.add_argument("--ref", help="also run every case on this git revision (e.g. main)")
    args = parser.parse_args()
    names = [n for n in args.cases.split(",") if n]
    with tempfile.TemporaryDirectory(prefix="ingest-bounds-") as tmp:
        work = Path(tmp)
        versions = {"current": REPO}
        if args.ref:
            versions[args.ref] = export(args.ref, work)
        rows: list[dict[str, object]] = []
        for version, code in versions.items():
            baseline = _case(work, code, f"{version}-baseline", None, {}, args)
            rows.append({"version": version, "case": "baseline (good file only)", **baseline})
            for name in names:
                build, env = CASES[name]
                measured = _case(work, code, f"{version}-{name}", build, env, args)
                ratio = measured["seconds"] / baseline["seconds"] if baseline["seconds"] else None  # type: ignore[operator]
                rows.append({"version": version, "case": name, **measured, "x_baseline_seconds": ratio})
    _print(rows)
    caps = {"cap_seconds": args.cap_seconds, "cap_mb": args.cap_mb}
    print(json.dumps({"bench": "ingest_bounds", "machine": machine(), **caps, "rows": rows}))


def _case(
    work: Path, code: Path, label: str, build: Callable[[Path], Path] | None, env: dict[str, str], args: Any
) -> dict[str, object]:
    folder = work / label / "docs"
    folder.mkdir(parents=True)
    (folder / "good.md").write_text(hostile.GOOD_TEXT)
    if build is not None:
        build(folder)
    return run_add(code, folder, work / label / "kb.lancedb", env, args.cap_seconds, args.cap_mb)


def _print(rows: list[dict[str, object]]) -> None:
    print(describe(), f"load {machine()['load_1_5_15']}", file=sys.stderr)
    header = f"{'version':<9} {'case':<27} {'seconds':>8} {'x base':>7} {'peak RSS MB':>11} {'exit':>5}  reason"
    print(header)
    for row in rows:
        ratio = row.get("x_baseline_seconds")
        shown_ratio = f"{ratio:.2f}" if isinstance(ratio, float) else "-"
        seconds = f"> {row['seconds']}" if row["killed_at_cap"] else f"{row['seconds']}"
        reason = str(row["reason"])[:70]
        print(
            f"{row['version']:<9} {row['case']:<27} {seconds:>8} {shown_ratio:>7} {row['peak_rss_mb']:>11} "
            f"{row['exit']!s:>5}  {reason}"
        )


if __name__ == "__main__":
    main()
