"""First build of the sample knowledge base from an empty home directory, through the real command line.

Each run, in a fresh HOME (no built sample, no cached quantized embedder), times:
- `--db KB add DIR` of the sample documents without the workbook and the scanned memo
  (the baseline: the sample before it had formats that need calamine and OCR),
- `--db KB add DIR` of all the sample documents (the same path, the extra files included),
- `--sample info`, the real first use (`serve --sample` does the same build in the background).
The three are interleaved, so each run's load is shared; prints the range over runs and
the ratio all/baseline.

    .venv/bin/python bench/sample_build.py             # 3 runs
    .venv/bin/python bench/sample_build.py --runs 5
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _machine import describe, machine

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from mcp_analysis.sample import documents_dir  # noqa: E402
from tools.make_sample_extras import MEMO, WORKBOOK  # noqa: E402

VARIANTS = ("add: without workbook and scan", "add: all sample documents", "--sample info")


def timed(args: list[str], home: Path) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")}
    env["HOME"] = str(home)
    started = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "mcp_analysis", *args], env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if run.returncode != 0:
        raise SystemExit(f"{args} failed:\n{run.stderr}")
    return elapsed


def one_run(work: Path) -> dict[str, float]:
    without = work / "without-extras"
    without.mkdir()
    for path in documents_dir().iterdir():
        if path.name not in (WORKBOOK, MEMO):
            shutil.copy(path, without / path.name)
    commands = {
        VARIANTS[0]: ["--db", str(work / "a.lancedb"), "add", str(without)],
        VARIANTS[1]: ["--db", str(work / "b.lancedb"), "add", str(documents_dir())],
        VARIANTS[2]: ["--sample", "info"],
    }
    times = {}
    for name, args in commands.items():
        home = work / f"home-{VARIANTS.index(name)}"
        home.mkdir()
        times[name] = timed(args, home)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    options = parser.parse_args()
    load_before = machine()["load_1_5_15"]
    runs = []
    for _ in range(options.runs):
        with tempfile.TemporaryDirectory(prefix="sample-build-") as work:
            runs.append(one_run(Path(work)))
    print(describe(), f"load before {load_before}, after {machine()['load_1_5_15']}")
    print(f"{'first build from an empty HOME':34} {'min s':>7} {'max s':>7}")
    figures: dict[str, object] = {"machine": machine(), "load_before": load_before, "runs": runs}
    for name in VARIANTS:
        values = [run[name] for run in runs]
        print(f"{name:34} {min(values):7.1f} {max(values):7.1f}")
    ratios = [run[VARIANTS[1]] / run[VARIANTS[0]] for run in runs]
    print(f"ratio all/baseline per run: {', '.join(f'{r:.2f}' for r in ratios)}")
    figures["ratio_all_over_baseline"] = ratios
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
