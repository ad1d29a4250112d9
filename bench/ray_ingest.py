"""`add` on this machine vs `add --ray` on a Ray cluster of 1 and of 2 nodes (one CPU each, on
loopback: tests/ingest/ray/cluster.py), side by side on one synthetic folder, `--runs` times.

The folder: `--files` Markdown files of `--chunks-per-file` chunks each (sections of Zipf-drawn
words), written once. Each run adds it to a fresh knowledge base through the real CLI
(a process of its own, as a user runs it) and reads the `--json` report: wall time (process
start to exit), chunks/s and files/s over it, and for Ray the seconds per stage. While it runs,
the driver's resident memory and the largest Ray worker's (an embedding actor or a conversion
task's worker with its conversion process) are sampled.

    python bench/ray_ingest.py [--files 2000] [--chunks-per-file 10] [--runs 3] [--configs local,ray1,ray2]

A long series can be split into invocations (so a shared machine's other jobs can interleave):
`--append FILE` adds each invocation's raw runs, with the load before and after, as one JSON line;
`--report FILE...` combines the lines into one table (min-median-max over all runs) and refuses
lines made on different folders, so every config's figure counts the same work.

    python bench/ray_ingest.py --runs 1 --work DIR --append DIR/series.jsonl   # three times
    python bench/ray_ingest.py --report DIR/series.jsonl
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _machine import describe, machine  # noqa: E402

from tests.ingest.ray.cluster import RayCluster  # noqa: E402

WORDS_PER_CHUNK = 45  # pseudo-words of ~5 tokens each: one ~256-token chunk per section


def make_folder(folder: Path, files: int, chunks_per_file: int, seed: int = 3) -> None:
    """`files` Markdown files, each `chunks_per_file` sections of ~WORDS_PER_CHUNK words (kept if there)."""
    marker = folder / ".complete"
    if marker.exists():
        return
    from _synthetic import vocabulary

    words = vocabulary()
    ranks = np.arange(1, len(words) + 1)
    weights = (1 / ranks**1.05) / (1 / ranks**1.05).sum()
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for n in range(files):
        sections = []
        for s in range(chunks_per_file):
            picked = rng.choice(len(words), size=WORDS_PER_CHUNK, p=weights)
            sections.append(f"## Section {s + 1}\n\n" + " ".join(words[i] for i in picked))
        (folder / f"doc-{n:05d}.md").write_text(f"# Document {n}\n\n" + "\n\n".join(sections) + "\n")
    marker.write_text("")


class Sampler:
    """Peak resident memory of the driver process and of the largest Ray worker of `tmpdir`'s cluster."""

    def __init__(self, driver: psutil.Process, ray_tmpdir: str | None) -> None:
        self.driver = driver
        self.marker = f"RAY_TMPDIR={ray_tmpdir}".encode() if ray_tmpdir else None
        self.driver_peak = 0
        self.worker_peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _workers(self) -> list[psutil.Process]:
        found = []
        for process in psutil.process_iter(["cmdline"]):
            cmdline = " ".join(process.info["cmdline"] or [])
            if self.marker and ("ray::" in cmdline or "mcp_analysis.ingest.worker" in cmdline):
                try:
                    if self.marker in Path(f"/proc/{process.pid}/environ").read_bytes().split(b"\0"):
                        found.append(process)
                except OSError:
                    pass
        return found

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            with contextlib.suppress(psutil.Error):
                self.driver_peak = max(self.driver_peak, self.driver.memory_info().rss)
            for worker in self._workers():
                try:
                    # A task's Ray worker and the conversion process it started count together.
                    rss = worker.memory_info().rss + sum(c.memory_info().rss for c in worker.children())
                except psutil.Error:
                    continue
                self.worker_peak = max(self.worker_peak, rss)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def run_add(folder: Path, db: Path, address: str | None, ray_tmpdir: str | None) -> dict[str, Any]:
    command = [sys.executable, "-m", "mcp_analysis", "--db", str(db), "add", str(folder), "--json"]
    if address:
        command += ["--ray", address]
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    sampler = Sampler(psutil.Process(process.pid), ray_tmpdir)
    out, err = process.communicate()
    wall = time.perf_counter() - started
    sampler.stop()
    if process.returncode != 0:
        raise SystemExit(f"add failed ({process.returncode}): {err.decode()[-2000:]}")
    report = json.loads(out)
    return {
        "wall": wall,
        "files": len(report["added"]),
        "chunks": report["chunks"],
        "stages": report.get("stages", {}),
        "nodes": report.get("nodes"),
        "driver_mb": sampler.driver_peak / 2**20,
        "worker_mb": sampler.worker_peak / 2**20 if ray_tmpdir else None,
    }


def summarize(name: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    if len({(r["files"], r["chunks"]) for r in runs}) != 1:
        raise SystemExit(f"{name}: the runs did not add the same files and chunks, no range over them")
    chunks_s = [r["chunks"] / r["wall"] for r in runs]
    files_s = [r["files"] / r["wall"] for r in runs]
    stages = {k: round(statistics.median(r["stages"][k] for r in runs), 2) for k in runs[0]["stages"]}
    worker = [r["worker_mb"] for r in runs if r["worker_mb"] is not None]
    return {
        "config": name,
        "runs": len(runs),
        "files": runs[0]["files"],
        "chunks": runs[0]["chunks"],
        "nodes": runs[0]["nodes"],
        "chunks_per_s": [round(min(chunks_s), 1), round(statistics.median(chunks_s), 1), round(max(chunks_s), 1)],
        "files_per_s": [round(min(files_s), 2), round(statistics.median(files_s), 2), round(max(files_s), 2)],
        "wall_s": [round(min(r["wall"] for r in runs), 1), round(max(r["wall"] for r in runs), 1)],
        "stages_median_s": stages,
        "driver_peak_mb": round(max(r["driver_mb"] for r in runs)),
        "largest_ray_worker_peak_mb": round(max(worker)) if worker else None,
    }


def series(args: argparse.Namespace) -> dict[str, Any]:
    """One series: each config `--runs` times on the folder, the raw runs and the machine's load around them."""
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-ray-"))
    folder = work / f"docs-{args.files}x{args.chunks_per_file}"
    make_folder(folder, args.files, args.chunks_per_file)
    print(describe(), file=sys.stderr)
    record: dict[str, Any] = {
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "folder": str(folder),
        "load_before": machine()["load_1_5_15"],
        "runs": {},
    }
    for config in args.configs.split(","):
        nodes = 0 if config == "local" else int(config.removeprefix("ray"))
        cluster = RayCluster(work, nodes) if nodes else None
        runs = record["runs"].setdefault(config, [])
        try:
            if cluster:
                os.environ["RAY_AUTH_MODE"] = "disabled"
                cluster.start()
            for run in range(args.runs):
                db = work / f"kb-{config}-{run}.lancedb"
                shutil.rmtree(db, ignore_errors=True)
                runs.append(run_add(folder, db, cluster.address if cluster else None, cluster and cluster.tmpdir))
                print(f"{config} run {run + 1}: {runs[-1]['wall']:.1f} s", file=sys.stderr)
                shutil.rmtree(db, ignore_errors=True)
        finally:
            if cluster:
                cluster.stop()
    record["machine"] = machine()
    record["load_after"] = record["machine"]["load_1_5_15"]
    return record


def combine(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The summaries over every run of `records`, which must all have worked on one folder."""
    folders = {r["folder"] for r in records}
    if len(folders) != 1:
        raise SystemExit(f"the series ran on different folders ({', '.join(sorted(folders))}): no common range")
    runs: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        for config, config_runs in record["runs"].items():
            runs.setdefault(config, []).extend(config_runs)
    return {
        "machine": records[-1]["machine"],
        "series": [{k: r[k] for k in ("started", "load_before", "load_after")} for r in records],
        "results": [summarize(config, config_runs) for config, config_runs in runs.items()],
    }


def table(combined: dict[str, Any]) -> str:
    """The combined results as a Markdown table, one row per config."""
    lines = [
        "| Config | runs | chunks/s min-median-max | files/s min-median-max | wall s | stages (median s) |"
        " driver / largest Ray worker peak MB |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in combined["results"]:
        stages = ", ".join(f"{k} {v}" for k, v in r["stages_median_s"].items()) or "-"
        lines.append(
            f"| {r['config']} | {r['runs']} | {'-'.join(map(str, r['chunks_per_s']))}"
            f" | {'-'.join(map(str, r['files_per_s']))} | {'-'.join(map(str, r['wall_s']))} | {stages}"
            f" | {r['driver_peak_mb']} / {r['largest_ray_worker_peak_mb'] or '-'} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--chunks-per-file", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--configs", default="local,ray1,ray2")
    parser.add_argument("--work", type=Path, default=None, help="where the folder and knowledge bases go")
    parser.add_argument("--append", type=Path, default=None, help="add this series' raw runs to FILE (JSON lines)")
    parser.add_argument("--report", type=Path, nargs="+", default=None, help="combine the series in FILE... only")
    args = parser.parse_args()
    if args.report:
        records = [json.loads(line) for path in args.report for line in path.read_text().splitlines() if line]
        combined = combine(records)
        print(table(combined), file=sys.stderr)
        print(json.dumps(combined, indent=2))
        return
    # Stopped with SIGTERM (or Ctrl-C), the clusters started here are stopped too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    record = series(args)
    if args.append:
        with args.append.open("a") as results:
            results.write(json.dumps(record) + "\n")
    print(json.dumps(combine([record]), indent=2))


if __name__ == "__main__":
    main()
