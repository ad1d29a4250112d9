"""CPU seconds a Ray cluster's processes burn for one small `add --ray`, beside the driver's own.

A two-node loopback cluster (tests/ingest/ray/cluster.py, one CPU each) is started by this
process, made a child subreaper first, so every process the nodes start (raylets, agents, the
jobs' workers and their conversion workers) stays in its process tree. The raylets reap their
workers without counting them (their children's times are not in /proc), so a thread reads every
descendant's own CPU time (`/proc/PID/stat`) every 0.1 s and keeps each one's last figure: a
process's CPU is counted up to its last sample (a process that lived less than 0.1 s is missed).
The driver (`mcp-analysis add`) and what it starts are counted apart from the cluster.

Each round: `add --ray` of `--files` small Markdown files into a fresh knowledge base (new), then
the same add again (everything unchanged). After each add, the cluster is left until as many of
its processes live as before (the job's workers gone); the cluster's idle burn (raylets, GCS,
agents) over those seconds, measured once before, is subtracted.

    python bench/ray_job_cpu.py [--rounds 3] [--files 3]
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _machine import describe, machine  # noqa: E402

from tests.ingest.ray.cluster import RayCluster  # noqa: E402

_PR_SET_CHILD_SUBREAPER = 36
_TICKS = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, float, bool] | None:
    """(parent pid, own CPU seconds, whether it has ended) of a process, None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICKS, fields[0] in ("Z", "X")


def _reap() -> None:
    """Reap the orphans handed to this subreaper."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def descendants(root: int) -> dict[int, tuple[int, float, bool]]:
    """`root`'s descendants (zombies too): (parent, own CPU seconds, ended) by pid."""
    stats = {int(p.name): s for p in Path("/proc").iterdir() if p.name.isdigit() and (s := _stat(int(p.name)))}
    mine: dict[int, tuple[int, float, bool]] = {}
    frontier = {root}
    while frontier:
        frontier = {pid for pid, (parent, _, _) in stats.items() if parent in frontier and pid not in mine}
        mine.update({pid: stats[pid] for pid in frontier})
    return mine


class Sampler:
    """Every descendant's last-seen CPU seconds; `driver` pids (and what they start) kept apart."""

    def __init__(self) -> None:
        self.seen: dict[int, float] = {}
        self.titles: dict[int, str] = {}  # each process's last title (Ray sets it to the task or actor it runs)
        self.drivers: set[int] = set()
        self.live = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            self.sample()

    def sample(self) -> None:
        found = descendants(os.getpid())
        with self._lock:
            for pid, (parent, cpu, _) in found.items():
                self.seen[pid] = max(cpu, self.seen.get(pid, 0.0))
                with contextlib.suppress(OSError):
                    words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                    title = next((w for w in words if w.startswith((b"ray::", b"mcp_analysis."))), words[0])
                    self.titles[pid] = title.decode(errors="replace").strip()[:40] or self.titles.get(pid, "?")
                if parent in self.drivers:
                    self.drivers.add(pid)
            self.live = len([pid for pid, (_, _, ended) in found.items() if not ended and pid not in self.drivers])

    def by_title(self, since: dict[int, float]) -> dict[str, tuple[int, float]]:
        """The cluster's CPU seconds since `since` (a copy of `seen`), by process title: (processes, seconds)."""
        with self._lock:
            found: dict[str, tuple[int, float]] = {}
            for pid, cpu in self.seen.items():
                if pid not in self.drivers and cpu - since.get(pid, 0.0) > 0.005:
                    count, total = found.get(self.titles.get(pid, "?"), (0, 0.0))
                    found[self.titles.get(pid, "?")] = (count + 1, total + cpu - since.get(pid, 0.0))
            return found

    def totals(self) -> tuple[float, float]:
        """(the cluster's CPU seconds so far, the drivers')."""
        with self._lock:
            driver = sum(cpu for pid, cpu in self.seen.items() if pid in self.drivers)
            return sum(self.seen.values()) - driver, driver

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def settle(sampler: Sampler, baseline: int, timeout: float = 60.0) -> None:
    """Until as few cluster processes live as before the add (its job's workers have ended)."""
    deadline = time.monotonic() + timeout
    time.sleep(0.5)
    while sampler.live > baseline and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(0.3)


def add(folder: Path, db: Path, address: str, sampler: Sampler) -> tuple[dict[str, Any], float]:
    """(the add's report, its wall seconds)."""
    command = [sys.executable, "-m", "mcp_analysis", "--db", str(db), "add", str(folder), "--ray", address, "--json"]
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        sampler.drivers.add(process.pid)
        process.wait()
        wall = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        if process.returncode != 0:
            raise SystemExit(f"add failed ({process.returncode}): {err.read().decode()[-2000:]}")
        return json.loads(out.read()), wall


def measured(sampler: Sampler, folder: Path, db: Path, address: str, idle_rate: float) -> dict[str, float]:
    sampler.sample()
    (cluster_before, driver_before), baseline = sampler.totals(), sampler.live
    since = dict(sampler.seen)
    clock = time.monotonic()
    report, wall = add(folder, db, address, sampler)
    settle(sampler, baseline)
    cluster_after, driver_after = sampler.totals()
    idle = idle_rate * (time.monotonic() - clock)
    parts = sorted(sampler.by_title(since).items(), key=lambda kv: -kv[1][1])
    print("  by process:", "; ".join(f"{title} x{n}: {cpu:.2f}" for title, (n, cpu) in parts), flush=True)
    return {
        "wall": wall,
        "driver_cpu": driver_after - driver_before,
        "cluster_cpu": cluster_after - cluster_before - idle,
        "added": len(report["added"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--files", type=int, default=3)
    args = parser.parse_args()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise SystemExit("prctl(PR_SET_CHILD_SUBREAPER) failed: the cluster's orphans would be lost")
    os.environ["RAY_AUTH_MODE"] = "disabled"
    print(describe(), "load", machine()["load_1_5_15"], flush=True)
    with tempfile.TemporaryDirectory(prefix="ray-cpu-") as work:
        here = Path(work)
        folder = here / "docs"
        folder.mkdir()
        for n in range(args.files):
            (folder / f"note-{n}.md").write_text(f"# Note {n}\n\nBerth {n} was inspected; crane {n} is in service.\n")
        (here / "logs").mkdir()
        cluster = RayCluster(here / "logs")
        try:
            cluster.start()
            sampler = Sampler()
            time.sleep(5)  # the nodes' start-up work done
            start = sampler.totals()[0]
            time.sleep(10)
            idle_rate = (sampler.totals()[0] - start) / 10
            print(f"cluster idle: {idle_rate:.3f} CPU s/s over 10 s ({sampler.live} processes)", flush=True)
            rows: dict[str, list[dict[str, float]]] = {"new": [], "unchanged": []}
            for n in range(args.rounds):
                db = here / f"kb-{n}.lancedb"
                for case in rows:
                    row = measured(sampler, folder, db, cluster.address, idle_rate)
                    rows[case].append(row)
                    print(case, {k: round(v, 2) for k, v in row.items()}, flush=True)
        finally:
            with contextlib.suppress(Exception):
                cluster.stop()
            _reap()
    sampler.stop()
    for case, runs in rows.items():
        parts = {k: [r[k] for r in runs] for k in ("cluster_cpu", "driver_cpu", "wall")}
        said = ", ".join(f"{k} {min(v):.1f}-{max(v):.1f} (median {statistics.median(v):.1f})" for k, v in parts.items())
        print(f"{case} ({args.files} files, {len(runs)} rounds): {said} s")


if __name__ == "__main__":
    main()
