"""How long `mcp-analysis add` of one new file takes, end to end, as a user runs it.

Each round adds one new Markdown file twice: into a knowledge base that holds a document already
(the common case: a note added to a knowledge base in use) and into a new one; then the same file
again into the first (unchanged: nothing to convert). The clock runs
from the command's start to its exit; the CPU time is the command's and its conversion worker's
(`resource.RUSAGE_CHILDREN`). With `--baseline DIR` (another checkout of this repository, e.g. a
`git worktree` at an older commit) the same rounds run there too, in turns, with the same Python
environment: `python -m mcp_analysis` imports the package from the folder it runs in.

    python bench/cli_add.py [--rounds 5] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _machine import describe

REPO = Path(__file__).resolve().parent.parent


def note(path: Path, n: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# Note {n}\n\nThe harbour crane lifted {n} containers before the tide turned.\n")
    return path


def timed_add(tree: Path, db: Path, file: Path, env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one `add` run in `tree`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "mcp_analysis", "--db", str(db), "add", str(file)],
        cwd=tree,
        env=env,
        check=True,
        capture_output=True,
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--baseline", type=Path, help="another checkout to time in turns")
    args = parser.parse_args()
    trees = {"this tree": REPO} | ({"baseline": args.baseline.resolve()} if args.baseline else {})
    results: dict[tuple[str, str], list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="cli-add-") as scratch:
        base = Path(scratch)
        env = {**os.environ, "XDG_DATA_HOME": str(base / "data")}  # the model cache: shared, made once
        for name, tree in trees.items():  # an unmeasured add first: bytecode, page cache, the model
            timed_add(tree, base / f"warm-{len(name)}.lancedb", note(base / "warm" / f"{len(name)}.md", 0), env)
        for round_ in range(args.rounds):
            for name, tree in trees.items():
                folder = base / f"{name.replace(' ', '-')}-{round_}"
                existing = folder / "existing.lancedb"
                timed_add(tree, existing, note(folder / "first.md", 1), env)
                new_file = note(folder / "second.md", 2)
                results.setdefault((name, "into a knowledge base in use"), []).append(
                    timed_add(tree, existing, new_file, env)
                )
                results.setdefault((name, "into a new knowledge base"), []).append(
                    timed_add(tree, folder / "new.lancedb", new_file, env)
                )
                results.setdefault((name, "the same file again"), []).append(timed_add(tree, existing, new_file, env))
    print(describe(), f"load {os.getloadavg()[0]:.1f} at the end, {args.rounds} rounds")
    print(f"{'tree':<10} {'case':<30} {'wall p50 (min-max)':>22} {'CPU p50':>8}")
    for (name, case), runs in results.items():
        walls, cpus = [w for w, _ in runs], [c for _, c in runs]
        spread = f"{statistics.median(walls):.2f} ({min(walls):.2f}-{max(walls):.2f}) s"
        print(f"{name:<10} {case:<30} {spread:>22} {statistics.median(cpus):>6.2f} s")
    if args.baseline:
        for case in ("into a knowledge base in use", "into a new knowledge base", "the same file again"):
            ours = statistics.median(w for w, _ in results[("this tree", case)])
            theirs = statistics.median(w for w, _ in results[("baseline", case)])
            print(f"{case}: this tree / baseline = {ours / theirs:.2f}x")


if __name__ == "__main__":
    main()
